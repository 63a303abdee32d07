"""Scopes: a view of the variables and rng streams at one path of a model.

All scopes of one ``init``/``apply`` share a :class:`_Root` that holds the
variable collections (collection -> nested dict keyed by path) and the
mutability filter. A scope caches the dict of its own path per collection, so
reading a parameter is two dict lookups whatever the model's depth.

``Scope.param`` on apply checks a stored value's shape (``_param_shapes.py``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax

from linen.core import errors
from linen.core._filters import Filter, in_filter
from linen.core._lazy_init import EAGER_LAZY_INIT, concrete_init
from linen.core._param_shapes import check_param_shape
from linen.core._rng import LazyRng, RngStream, check_rngs
from linen.core._staged_init import STAGING_TRACER, call_initializer
from linen.core.config import config

__all__ = ['Array', 'LazyRng', 'Scope', 'Variable']

Array = jax.Array

_ABSENT = object()
# Initializers that never read their key (Flax's defaults for biases and scales).
_ZEROS = jax.nn.initializers.zeros
_ONES = jax.nn.initializers.ones
_CHILD = object()  # marks child entries in a scope's rng counters


class _Root:
    """State shared by every scope of one binding."""

    __slots__ = (
        'variables',
        'mutable',
        'valid',
        'offset',
        'lifted',
        'mutable_cols',
        'cache',
        'col_caches',
    )

    def __init__(self, variables: dict[str, Any], mutable: Filter, offset: int = 0):
        self.variables = variables
        self.mutable = mutable
        # collection -> in_filter(mutable, collection): asked for every variable written
        self.mutable_cols: dict[str, bool] = {}
        self.valid = True
        # Scopes made inside a lifted transform keep their full path (for rng
        # streams and messages); `offset` leading names are above the variables.
        self.offset = offset
        # Made for a lifted transform (linen.core.lifting.detached_scope): error
        # messages say the transform decides what may change there too.
        self.lifted = False
        # Scope.binding_cache: made on first use, dropped when invalidated.
        self.cache: dict[Any, Any] | None = None
        # Every scope's cache of its collection dicts (Scope._cols), registered when
        # first filled: a subtree replaced by put_variable empties them all, so a
        # scope below it reads the new subtree (as in Flax), at no cost per read.
        self.col_caches: list[dict[str, Any]] = []


_META: list[Any] = []


def _meta():
    # meta imports this module's siblings; resolve it on first use, then keep it.
    if not _META:
        from linen.core import meta

        _META.append(meta)
    return _META[0]


_BOXED_TYPES: dict[type, bool] = {}


def _is_boxed(value) -> bool:
    # A dict lookup per type instead of an ABC isinstance check per call.
    kind = type(value)
    boxed = _BOXED_TYPES.get(kind)
    if boxed is None:
        boxed = _BOXED_TYPES[kind] = isinstance(value, _meta().AxisMetadata)
    return boxed


def _unbox(value, scope=None, collection: str = '', name: str = ''):
    meta = _meta()
    if scope is None:
        return meta.unbox(value)
    # A box may map its names through the logical rules here; a bad rule then names
    # the variable it belongs to (``params/Dense_0/kernel``).
    where = '/'.join((collection, *map(str, scope.path), name))
    token = meta._VARIABLE_PATH.set(where)
    try:
        return meta.unbox(value)
    finally:
        meta._VARIABLE_PATH.reset(token)


# ---------------------------------------------------------------------- Variable


class Variable:
    """A reference to one variable of a scope; ``.value`` reads and writes it.

    >>> from linen.core import init
    >>> def count_calls(scope):
    ...     counter = scope.variable('counter', 'count', lambda: 0)
    ...     counter.value += 1
    ...     return counter.value
    >>> init(count_calls)(jax.random.key(0))
    (1, {'counter': {'count': 1}})
    """

    __slots__ = ('scope', 'collection', 'name', 'unbox')

    def __init__(self, scope: Scope, collection: str, name: str, unbox: bool = True):
        self.scope = scope
        self.collection = collection
        self.name = name
        self.unbox = unbox

    @property
    def value(self):
        v = self.scope.get_variable(self.collection, self.name)
        if self.unbox and _is_boxed(v):
            return _unbox(v, self.scope, self.collection, self.name)
        return v

    @value.setter
    def value(self, value):
        if self.unbox:
            current = self.scope.get_variable(self.collection, self.name, _ABSENT)
            if current is not _ABSENT and _is_boxed(current):
                value = current.replace_boxed(value)
        self.scope.put_variable(self.collection, self.name, value)

    def is_mutable(self) -> bool:
        return self.scope.is_mutable_collection(self.collection)

    def __repr__(self) -> str:
        return f'Variable(collection={self.collection!r}, name={self.name!r})'


# ------------------------------------------------------------------------- Scope


class Scope:
    """Variables and rng streams at one path; create with :func:`init`/:func:`apply`/:func:`bind`.

    Attributes:
      name: the last path component (None for the root).
      parent: the enclosing scope (None for the root).
      path: tuple of names from the root.
    """

    __slots__ = (
        '_root',
        'name',
        'parent',
        'path',
        'reservations',
        'rng_counters',
        '_rngs',
        '_cols',
        'flags',
        '_debug_path',
        '__weakref__',
    )

    def __init__(
        self,
        variables: Mapping[str, Any] | _Root,
        rngs: Mapping[str, Any] | None = None,
        name: str | None = None,
        mutable: Filter = False,
        parent: Scope | None = None,
        path: Any = (),
        debug_path: Any = (),
        flags: Mapping[str, Any] | None = None,
        *,
        rng_counters: dict[str, int] | None = None,
    ):
        """Flax's signature: a scope over ``variables`` (the collections at ``path``).

        ``rngs`` maps stream names to keys (or :class:`LazyRng` streams);
        ``mutable`` filters the collections that may change. ``path`` only names
        the scope in messages: the variables given are the scope's own, and rng
        keys are used as given. Internally the first argument is the state shared
        by all scopes of one binding.
        """
        if type(variables) is not _Root:  # (_Root has no subclasses)
            variables, rngs, flags = _root_from_flax_arguments(
                variables, rngs, mutable, path, flags
            )
        self._root = variables
        self.name = name
        self.parent = parent
        if path and parent is None:
            self.path = tuple(path)
        else:
            self.path = () if parent is None else parent.path + (name,)
        self.reservations: dict[str, set] = {}
        # stream name -> count, and (_CHILD, child name) -> the child's counters:
        # a child pushed again (a compact method called twice) continues counting.
        self.rng_counters: dict[Any, Any] = {} if rng_counters is None else rng_counters
        self._rngs = rngs
        self._cols: dict[str, Any] = {}
        self.flags = flags if flags is not None else (parent.flags if parent else {})
        if debug_path:
            # (left unset otherwise: most scopes are pushed per call, and derive it)
            self._debug_path = tuple(debug_path)

    # -- identity -----------------------------------------------------------------

    @property
    def path_text(self) -> str:
        """The path as Flax writes it: ``'/outer/inner'``, and ``'/'`` for the root."""
        return '/' + self._path_str

    @property
    def _path_str(self) -> str:
        # The path without the leading slash, as the error classes take it.
        return '/'.join(map(str, self.path))

    @property
    def debug_path(self) -> tuple[str, ...]:
        """The path for messages and debugging (Flax's name); here it equals :attr:`path`
        unless a ``debug_path`` was given to the constructor."""
        try:
            return self._debug_path
        except AttributeError:
            pass
        parent = self.parent
        if parent is None:
            return self.path
        return parent.debug_path + (self.name,)

    @property
    def root(self) -> Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    @property
    def mutable(self) -> Filter:
        return self._root.mutable

    @property
    def rngs(self) -> dict[str, RngStream]:
        rngs = self._rngs
        if rngs is None:
            # Children derive their streams only when asked: an apply without
            # rngs, or with a few streams used deep down, pays nothing elsewhere.
            parent_rngs = self.parent.rngs if self.parent is not None else {}
            rngs = self._rngs = {k: r.child(self.name) for k, r in parent_rngs.items()}
        return rngs

    def __repr__(self) -> str:
        return f'Scope(path={self._path_str!r})'

    # -- validity -----------------------------------------------------------------

    def invalidate(self) -> None:
        """Mark every scope of this binding as no longer usable (and drop its cache)."""
        root = self._root
        root.valid = False
        # What layers above kept there (bound modules, which hold scopes of this
        # binding) must not outlive it: the binding's traced values would leak.
        root.cache = None

    @property
    def binding_cache(self) -> dict[Any, Any]:
        """A dict shared by every scope of this binding, for the layers above the core.

        Dropped when the binding is invalidated (the end of ``init``/``apply``), so
        what is kept there never outlives the binding: linen-module keeps the
        modules it adopted during one binding there.

        >>> from linen.core import bind
        >>> root = bind({})
        >>> root.push('a').binding_cache is root.binding_cache
        True
        """
        root = self._root
        cache = root.cache
        if cache is None:
            cache = root.cache = {}
        return cache

    def _check_valid(self) -> None:
        if not self._root.valid:
            raise errors.InvalidScopeError(self._path_str or '<root>')

    @contextlib.contextmanager
    def temporary(self):
        """Context in which this (root) scope is valid; invalidated on exit."""
        try:
            yield self
        finally:
            self.invalidate()

    # -- naming -------------------------------------------------------------------

    def reserve(self, name: str, col: str | None = None) -> None:
        """Claim ``name`` in this scope; a variable name may repeat across collections."""
        if not isinstance(name, str):
            raise TypeError(
                f'Variable and submodule names must be str, got {name!r} in {self._path_str!r}.'
            )
        taken = self.reservations.get(name)
        if taken is None:
            self.reservations[name] = {col}
            return
        if col is None or col in taken or None in taken:
            raise errors.DuplicateScopeNameError(
                name, self._path_str, f'variable of collection "{col}"' if col else 'child scope'
            )
        taken.add(col)

    def default_name(self, prefix: str) -> str:
        """The first free ``f'{prefix}{i}'``."""
        i = 0
        while f'{prefix}{i}' in self.reservations:
            i += 1
        return f'{prefix}{i}'

    def rewound(self, rewind_rngs: bool = False) -> Scope:
        """A fresh view of the same path: names may be claimed again.

        Rng counters carry over unless ``rewind_rngs``.
        """
        scope = Scope(
            self._root,
            name=self.name,
            parent=self.parent,
            rngs=self._rngs,
            rng_counters={} if rewind_rngs else self.rng_counters,
            flags=self.flags,
        )
        scope.path = self.path
        scope._cols = self._cols
        return scope

    def push(self, *args: Any, **kwargs: Any) -> Any:
        """``push(name=None, prefix='', reuse=False)``: a child scope called ``name``.

        Without a name the child takes the next free ``prefix{i}``. Given a
        function first, ``push(fn, name=None, prefix=None, named_call=True,
        **partial_kwargs)`` is :meth:`child`: ``fn`` bound to a new child scope
        (a spelling linen accepts besides Flax's ``child``).
        """
        if args and type(args[0]) is not str and callable(args[0]):
            return self.child(*args, **kwargs)
        return self._push_scope(*args, **kwargs)

    def _push_scope(self, name: str | None = None, prefix: str = '', reuse: bool = False) -> Scope:
        # Runs for every submodule a compact method makes: helpers inlined.
        if not self._root.valid:
            self._check_valid()
        if name is None:
            name = self.default_name(prefix)
        reservations = self.reservations
        if name not in reservations and type(name) is str:
            reservations[name] = {None}
        elif not reuse or name not in reservations:
            self.reserve(name)
        key = (_CHILD, name)
        counters = self.rng_counters.get(key)
        if counters is None:
            counters = self.rng_counters[key] = {}
        return Scope(self._root, name=name, parent=self, rngs=None, rng_counters=counters)

    def child(
        self,
        fn: Callable,
        name: str | None = None,
        prefix: str | None = None,
        named_call: bool = True,
        **partial_kwargs,
    ) -> Callable:
        """``fn`` partially applied to a child scope; runs under ``jax.named_scope(name)``.

        >>> from linen.core import init
        >>> def dense(scope, x, features):
        ...     kernel = scope.param('kernel', jax.nn.initializers.ones, (x.shape[-1], features))
        ...     return x @ kernel
        >>> def model(scope, x):
        ...     return scope.child(dense, 'dense')(x, 3)
        >>> y, variables = init(model)(jax.random.key(0), jnp.ones((1, 2)))
        >>> y
        Array([[2., 2., 2.]], dtype=float32)
        >>> jax.tree_util.tree_map(jnp.shape, variables)
        {'params': {'dense': {'kernel': (2, 3)}}}
        """
        if name is None:
            if prefix is None:
                prefix = getattr(fn, '__name__', 'child') + '_'
            name = self.default_name(prefix)
        scope = self.push(name)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            kwargs = dict(partial_kwargs, **kwargs)
            if named_call:
                with jax.named_scope(name):
                    return fn(scope.rewound(), *args, **kwargs)
            return fn(scope.rewound(), *args, **kwargs)

        return wrapper

    # -- collections --------------------------------------------------------------

    def is_mutable_collection(self, col: str) -> bool:
        root = self._root
        mutable = root.mutable_cols.get(col)
        if mutable is None:
            mutable = root.mutable_cols[col] = in_filter(root.mutable, col)
        return mutable

    def _collection(self, col: str) -> Any:
        """This scope's dict of ``col`` (None when absent). Cached per scope."""
        d = self._cols.get(col, _ABSENT)
        if d is not _ABSENT and d is not None:
            return d
        root = self._root
        d = root.variables.get(col)
        for part in self.path[root.offset :] if root.offset else self.path:
            if d is None:
                break
            d = d.get(part)
        if d is not None:
            cols = self._cols
            if not cols:
                root.col_caches.append(cols)
            cols[col] = d
        return d

    def _mutable_collection(self, col: str) -> dict:
        d = self._cols.get(col)
        if d is not None and isinstance(d, dict):
            return d
        root = self._root
        d = root.variables.get(col)
        if not isinstance(d, dict):
            d = root.variables[col] = {} if d is None else _thaw(d)
        for part in self.path[root.offset :] if root.offset else self.path:
            nxt = d.get(part)
            if not isinstance(nxt, dict):
                nxt = d[part] = {} if nxt is None else _thaw(nxt)
            d = nxt
        cols = self._cols
        if not cols:
            root.col_caches.append(cols)
        cols[col] = d
        return d

    def collections(self) -> tuple[str, ...]:
        """Names of the collections that hold variables at this path."""
        return tuple(c for c in self._root.variables if self._collection(c) is not None)

    def variables(self) -> dict[str, Any]:
        """``{collection: {name: value}}`` of this scope and below.

        A FrozenDict when the ``return_frozendict`` flag is on (as in Flax).
        """
        out = {}
        for col in self._root.variables:
            d = self._collection(col)
            if d is not None:
                out[col] = d
        if config.linen_return_frozendict:
            return _freeze(out)
        return out

    def is_collection_empty(self, col: str) -> bool:
        """Whether the binding holds nothing in ``col`` (at any path, as in Flax)."""
        return not self._root.variables.get(col)

    def has_variable(self, col: str, name: str) -> bool:
        d = self._collection(col)
        return d is not None and name in d

    def get_variable(self, col: str, name: str, default: Any = _ABSENT) -> Any:
        d = self._collection(col)
        if d is not None:
            v = d.get(name, _ABSENT)
            if v is not _ABSENT:
                return v
        if default is not _ABSENT:
            return default
        raise errors.ScopeVariableNotFoundError(name, col, self._path_str)

    def put_variable(self, col: str, name: str, value: Any) -> None:
        root = self._root
        if not root.valid:
            self._check_valid()
        mutable = root.mutable_cols.get(col)
        if mutable is None:
            mutable = self.is_mutable_collection(col)
        if not mutable:
            raise errors.ModifyScopeVariableError(col, name, self._path_str, root.lifted)
        d = self._cols.get(col)
        if d is None or type(d) is not dict:
            d = self._mutable_collection(col)
        if type(d.get(name)) is dict and isinstance(value, Mapping):
            # A subtree replaced (a child scope's variables, aliased): the scopes
            # below it must stop reading the old one.
            for cols in root.col_caches:
                cols.clear()
            root.col_caches = []
        d[name] = value

    # -- variables ----------------------------------------------------------------

    def variable(
        self,
        col: str,
        name: str,
        init_fn: Callable | None = None,
        *init_args,
        unbox: bool = True,
        **init_kwargs,
    ) -> Variable:
        """A :class:`Variable` for ``col/name``, created with ``init_fn(*init_args)`` if absent."""
        self.reserve(name, col)
        if not self.has_variable(col, name):
            if not self.is_mutable_collection(col) or init_fn is None:
                if self.is_collection_empty(col):
                    raise errors.ScopeCollectionNotFound(
                        col, name, self._path_str, self._root.lifted
                    )
                raise errors.ScopeVariableNotFoundError(name, col, self._path_str)
            if EAGER_LAZY_INIT.get():  # an eager lazy_init: off its shape trace
                value = concrete_init(init_fn, init_args, init_kwargs, self.rng_counters)
            else:
                value = init_fn(*init_args, **init_kwargs)
            self.put_variable(col, name, value)
        return Variable(self, col, name, unbox=unbox)

    def param(
        self, name: str, init_fn: Callable, *init_args, unbox: bool = True, **init_kwargs
    ) -> Any:
        """The parameter ``name``, initialized with ``init_fn(make_rng('params'), *init_args)``.

        On apply, a stored value whose shape differs from what ``init_fn`` gives
        raises :class:`~linen.core.errors.ScopeParamShapeError`.
        """
        # The apply path of every parameter of every layer: inlined lookups, no
        # helper frames (reserve, _collection, _is_boxed) in the common case.
        reservations = self.reservations
        if name in reservations or type(name) is not str:
            self.reserve(name, 'params')
        else:
            reservations[name] = {'params'}
        # (subscripts, not .get: on apply the collection and the value are there)
        try:
            d = self._cols['params']
        except KeyError:
            d = self._collection('params')
        try:
            value = d[name]
        except (KeyError, TypeError):  # absent (d None: no params at all)
            value = _ABSENT
        if value is _ABSENT:
            if not self.is_mutable_collection('params'):
                if self.is_collection_empty('params'):
                    raise errors.ScopeCollectionNotFound(
                        'params', name, self._path_str, self._root.lifted
                    )
                raise errors.ScopeParamNotFoundError(name, self._path_str)
            if init_fn is _ZEROS or init_fn is _ONES:
                # These ignore their key: draw it (the stream's count moves on and a
                # missing key still raises) but skip the fold-in, a dispatched op
                # eagerly and dead equations in a trace. The values are unchanged.
                key = self._unused_rng('params')
            else:
                key = self.make_rng('params')
            if EAGER_LAZY_INIT.get():  # an eager lazy_init: off its shape trace
                value = concrete_init(init_fn, (key, *init_args), init_kwargs, self.rng_counters)
            elif type(key) is STAGING_TRACER:  # a traced init: JAX's initializers staged
                value = call_initializer(init_fn, key, init_args, init_kwargs)
            else:
                value = init_fn(key, *init_args, **init_kwargs)
            self.put_variable('params', name, value)
            boxed = _is_boxed(value)
        else:
            try:
                boxed = _BOXED_TYPES[type(value)]
            except KeyError:
                boxed = _is_boxed(value)
            flags = self.flags
            if 'shape_check' not in flags or flags['shape_check']:
                check_param_shape(self, name, value, init_fn, init_args, init_kwargs, boxed)
        if unbox and boxed:
            value = _unbox(value, self, 'params', name)
        return value

    # -- rngs ---------------------------------------------------------------------

    def has_rng(self, name: str) -> bool:
        return name in self.rngs

    def make_rng(self, name: str = 'params') -> Any:
        """The next key of stream ``name`` (falling back to ``'params'``)."""
        stream, count = self._next_rng(name)
        return stream.derive(count)

    def _unused_rng(self, name: str) -> Any:
        """``make_rng(name)`` for a consumer that ignores the key: the draw is counted
        (and a missing stream raises) but no key is derived; the root key stands in."""
        return self._next_rng(name)[0].key

    def _next_rng(self, name: str) -> tuple[RngStream, int]:
        if not self._root.valid:
            self._check_valid()
        rngs = self._rngs
        if rngs is None:
            rngs = self.rngs
        stream = rngs.get(name)
        if stream is None:
            stream = rngs.get('params')
            if stream is None:
                # Flax's sentence first (the scope's name: None at the root).
                raise errors.InvalidRngError(
                    f'{self.name} needs PRNG for "{name}". No key for stream "{name}" '
                    f'was given to the scope "/{self._path_str}" (nor a "params" key '
                    f'to fall back to). Pass `rngs={{"{name}": key}}` to `init`/`apply`.'
                )
            name = 'params'
        count = self.rng_counters.get(name, 0) + 1
        self.rng_counters[name] = count
        return stream, count

    # -- results ------------------------------------------------------------------

    def mutable_variables(self, copy: bool = True) -> dict[str, Any]:
        """The collections this binding may mutate, as plain dicts.

        ``copy=False`` hands out the binding's own dicts, for a caller that
        invalidates the binding right after (``init``/``apply``: what they bound
        was copied on entry), saving a walk over every variable.
        """
        mutable = self._root.mutable
        thaw = _thaw if copy else _same
        out = {col: thaw(v) for col, v in self._root.variables.items() if in_filter(mutable, col)}
        if config.linen_return_frozendict:
            return _freeze(out)
        return out


def _freeze(x: Any) -> Any:
    from linen.core.frozen_dict import freeze

    return freeze(x)


def _root_from_flax_arguments(variables, rngs, mutable, path, flags):
    """The shared state for a scope built with Flax's ``Scope(variables, ...)``."""
    _check_variables(variables)
    streams = {}
    for stream, rng in (rngs or {}).items():
        if isinstance(rng, RngStream):
            streams[stream] = rng
        else:
            streams[stream] = RngStream(check_rngs({stream: rng})[stream])
    own = {col: (_thaw(v) if in_filter(mutable, col) else v) for col, v in variables.items()}
    flags = dict(flags or {})
    if 'shape_check' not in flags and not config.linen_shape_check:
        flags['shape_check'] = False  # (as `bind` does)
    return _Root(own, mutable, offset=len(tuple(path))), streams, flags


def _same(x: Any) -> Any:
    return x


def _thaw(x: Any) -> Any:
    """A plain-dict deep copy of nested mappings (leaves are shared)."""
    if isinstance(x, Mapping):
        return {k: _thaw(v) for k, v in x.items()}
    return x


def _check_variables(variables: Any) -> None:
    # (type tests first: a dict needs no trip through the Mapping ABC, on every apply)
    if type(variables) is not dict and not isinstance(variables, Mapping):
        raise errors.ApplyScopeInvalidVariablesTypeError(variables)
    for col, v in variables.items():
        if type(v) is not dict and not isinstance(v, Mapping):
            raise errors.ApplyScopeInvalidVariablesTypeError(variables, col)
    if 'params' in variables:
        params = variables['params']
        if params is not None and 'params' in params:
            raise errors.ApplyScopeInvalidVariablesStructureError(variables)
