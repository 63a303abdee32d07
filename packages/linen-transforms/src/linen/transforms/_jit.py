"""The lifted-``jit`` engine (``jit_over_scopes``) under ``nn.jit`` and ``_reuse``.

The compiled function is cached on what decides the trace: the structure of
the scope (path, rng stream paths and counters, mutability, flags), the
module's fields (for module methods), the static arguments, and the method
wrappers active in this context (so toggling profiling labels retraces instead
of leaving stale labels). Variables and rng keys are traced arguments.

Rng streams keep Flax's path-based derivation, so ``nn.jit`` gives the same
parameters for a key as the un-jitted module (Flax's does not), and yet the
module's path is not part of the cache key: the compiled function receives the
32-bit path hashes it needs as a traced array, computed outside for the
caller's path. Which (stream, relative path, count) hashes a trace needs is
learned once per cache entry by an abstract trace (``jax.eval_shape``), so the
same module class with the same attributes at ten paths compiles once.

The rng counters after the call are remembered per cache entry, so a second
call continues counting as the un-jitted code would.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.interpreters.partial_eval as pe
import jax.numpy as jnp
import numpy as np

from linen.core import DenyList, intersect_filters
from linen.core.lifting import detached_scope, path_hash
from linen.module.dispatch import active_wrappers
from linen.transforms import _pack
from linen.transforms._remat import merge_static, split_static
from linen.transforms._stack import on_fresh_chunk
from linen.transforms.errors import TransformArgumentError

# Values that stand for themselves in a cache key (the usual flags, filters and counts).
_ATOMS = frozenset({str, bool, int, float, type(None)})


def _hashable(x: Any) -> Any:
    """A hashable stand-in for filters, flags and counters."""
    kind = type(x)
    if kind in _ATOMS:
        return x
    if isinstance(x, dict):
        if not x:
            return ()
        items = [(_hkey(k), _hashable(v)) for k, v in x.items()]
        if all(type(k) is str for k, _ in items):
            # Distinct string keys sort alone (the values are never compared).
            return tuple(sorted(items, key=_first))
        return tuple(sorted(items, key=repr))
    if isinstance(x, (list, tuple)):
        return tuple(_hashable(v) for v in x)
    if isinstance(x, (set, frozenset)):
        return frozenset(x)
    if isinstance(x, DenyList):
        return ('DenyList', _hashable(x.deny))
    return x


def _first(item: tuple) -> Any:
    return item[0]


def _hkey(k: Any) -> Any:
    return k if isinstance(k, str) else ('child', k[1]) if isinstance(k, tuple) else repr(k)


class _Static:
    """The static part of one lifted-jit call; equal keys share a compiled function.

    JAX's caches keep the static argument of each trace as (part of) their key, and
    so do ``_ScopeJit``'s tables: the payload (the module, its scope, the caller's
    traced values) is dropped when the call returns, so no cache keeps a trace alive.
    """

    __slots__ = ('key', 'payload', '_hash')

    def __init__(self, key: tuple, payload: dict):
        self.key = key
        self.payload = payload  # not compared: derived from key or irrelevant to the trace
        self._hash = hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Static) and self.key == other.key


class _HashesNeeded(Exception):
    """Raised by a trace that draws from an rng path its table does not know.

    ``owner`` is the ``_ScopeJit`` whose table missed (``None``: the caller's own);
    ``stream``/``items`` name the path, for the error if learning it fails.
    """

    def __init__(self, owner: Any = None, stream: str = '', items: tuple = ()):
        super().__init__(stream, items)
        self.owner = owner
        self.stream = stream
        self.items = items


class _HashTable:
    """Where streams inside a compiled function find their path hashes.

    While discovering (``index is None``) lookups are recorded and answer 0;
    afterwards each (stream, items) maps to a position of the traced ``hashes``.
    """

    __slots__ = ('index', 'hashes', 'seen', 'owner')

    def __init__(self, index: dict | None, hashes: Any, owner: Any):
        self.index = index
        self.hashes = hashes
        self.seen: list[tuple] = []
        self.owner = owner

    def lookup(self, stream: str, items: tuple) -> Any:
        if self.index is None:
            if (stream, items) not in self.seen:
                self.seen.append((stream, items))
            return np.uint32(0)
        position = self.index.get((stream, items))
        if position is None:
            # A first trace that assumed no rng use, or a trace (of new input shapes,
            # say) drawing from a path the earlier ones did not: learn it, as Flax runs
            # such a function.
            raise _HashesNeeded(self.owner, stream, items)
        return self.hashes[position]


class _TableRngStream:
    """An rng stream inside a lifted jit: the caller's path hashed outside, the rest inside."""

    __slots__ = ('key', 'stream', 'rel', 'table', 'slot')

    def __init__(self, key: Any, stream: str, rel: tuple, table: _HashTable, slot: int = 0):
        self.key = key
        self.stream = stream
        self.rel = rel
        self.table = table
        self.slot = slot  # which of the lifted scopes the stream belongs to

    def child(self, name: str) -> _TableRngStream:
        return _TableRngStream(self.key, self.stream, self.rel + (name,), self.table, self.slot)

    def with_key(self, key: Any) -> _TableRngStream:
        return _TableRngStream(key, self.stream, self.rel, self.table, self.slot)

    def derive(self, count: int) -> Any:
        items = (self.slot, self.rel + (count,))
        return jax.random.fold_in(self.key, self.table.lookup(self.stream, items))


def jit_over_scopes(
    fn: Callable,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate_argnums: int | Sequence[int] = (),
    device: Any = None,
    backend: str | None = None,
    module_key: Callable[[Any], tuple[Any, Any]] | None = None,
    name: str | None = None,
    variables: Any = True,
    rngs: Any = True,
) -> Callable:
    """``jax.jit`` of ``fn(scope, *args)`` (or of a module method via ``module_key``).

    ``module_key(extra)`` (internal) maps the caller's extra object to
    ``(hashable key, object handed to fn)``. ``name`` names the compiled function
    (``jit(name)`` in the program and its op names; default ``run``). As in Flax,
    ``fn`` sees (and changes) only the collections ``variables`` admits and only the
    rng streams ``rngs`` admits.
    """
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    if isinstance(donate_argnums, int):
        donate_argnums = (donate_argnums,)
    return _ScopeJit(
        fn,
        static_argnums,
        static_argnames,
        donate_argnums,
        device,
        backend,
        module_key,
        name,
        variables,
        rngs,
    ).call


class _ScopeJit:
    """One ``jit_over_scopes``: its options, its compiled function and what it learnt.

    ``counters_after`` maps a cache entry to the rng counters after its trace;
    ``needed`` maps a cache entry to ``(seen, index)``: the (stream, items) path
    hashes a trace of it needs, and the position of each in the traced ``hashes``
    (none: the compiled function takes no ``hashes`` argument at all). ``varying``
    holds the entries whose rng use differs between traces (it depends on the input
    shapes): their counters are kept per shape signature of the call's arrays.
    """

    __slots__ = (
        'fn',
        'static_argnums',
        'static_argnames',
        'donate_argnums',
        'module_key',
        'variables',
        'rngs',
        'compiled',
        'counters_after',
        'needed',
        'varying',
    )

    def __init__(
        self,
        fn: Callable,
        static_argnums: Sequence[int],
        static_argnames: Sequence[str],
        donate_argnums: Sequence[int],
        device: Any,
        backend: str | None,
        module_key: Callable | None,
        name: str | None = None,
        variables: Any = True,
        rngs: Any = True,
    ):
        self.fn = fn
        self.variables, self.rngs = variables, rngs
        self.static_argnums = static_argnums
        self.static_argnames = static_argnames
        self.donate_argnums = frozenset(donate_argnums)
        self.module_key = module_key
        self.counters_after: dict[_Static, dict] = {}
        self.needed: dict[_Static, tuple] = {}
        self.varying: set[_Static] = set()
        # Donated arguments (counted as the caller passes them) travel apart from the
        # others, as argument 5, so JAX donates exactly them.
        run = self.run
        if name is not None:

            def run(*args):
                return self.run(*args)

            run.__name__ = run.__qualname__ = name
        self.compiled = jax.jit(
            run,
            static_argnums=(0,),
            donate_argnums=(5,) if donate_argnums else (),
            device=device,
            backend=backend,
        )

    def run(self, static: _Static, variables, keys, hashes, dynamic, donated, dyn_kwargs):
        """The traced function: ``fn`` on detached scopes whose streams hash through a table.

        A discovering trace (no index yet) records the path hashes it needs in the
        payload; a real one records the rng counters it ends with.
        """
        p = static.payload
        counters = _pack.copy_counters(p['counters'])
        table = _HashTable(p['index'], hashes, self)
        inner = _inner_scopes(p, variables, keys, counters, table)
        if donated:
            dynamic = _merge_donated(dynamic, donated, p['donated'])
        args = merge_static(dynamic, p['static_args'])
        arg = inner if p['multi'] else inner[0]
        y = self.fn(p['extra'], arg, *args, **dyn_kwargs, **p['static_kwargs'])
        if p['index'] is None:
            p['seen'] = tuple(table.seen)
        else:
            signature = p.get('signature')
            self.counters_after[static if signature is None else (static, signature)] = counters
        return y, tuple(_pack.inner_mutated(s, ())[0] for s in inner)

    def call(self, extra, scope_or_scopes, *args, **kwargs):
        """The lifted function: split the call into traced and static parts, run the
        compiled function, and hand its rng counters and variables back to the scopes."""
        # A tuple (or list) of scopes is lifted together (Module arguments, as in Flax).
        multi = isinstance(scope_or_scopes, (tuple, list))
        if multi:
            scopes = tuple(scope_or_scopes)
            variables = tuple(_pack.gather_variables(s) for s in scopes)
            keys_templates = [_pack.rng_keys(s) for s in scopes]
            keys = tuple(k for k, _ in keys_templates)
            templates = [t for _, t in keys_templates]
        else:
            scopes = (scope_or_scopes,)
            variables = (_pack.gather_variables(scope_or_scopes),)
            key_dict, template = _pack.rng_keys(scope_or_scopes)
            keys = (key_dict,)
            templates = [template]
        if self.variables is not True or self.rngs is not True:
            # As in Flax, the function sees only the collections and streams admitted.
            variables, keys = self._admitted(variables, keys)
        if self.static_argnums:
            dynamic, static_args = split_static(args, self.static_argnums)
        else:
            dynamic, static_args = args, {}
        static_kwargs = (
            {k: kwargs.pop(k) for k in self.static_argnames if k in kwargs}
            if self.static_argnames
            else {}
        )
        donated_at: tuple = ()
        donated: tuple = ()
        if self.donate_argnums:
            dynamic, donated, donated_at = _split_donated(dynamic, static_args, self.donate_argnums)
        wrappers = active_wrappers()
        extra_key, extra_obj = (
            self.module_key(extra, bool(wrappers)) if self.module_key is not None else (None, extra)
        )
        payload = _payload(extra_obj, multi, scopes, static_args, static_kwargs)
        payload['donated'] = donated_at
        if self.variables is not True:
            payload['mutable'] = tuple(
                intersect_filters(m, self.variables) for m in payload['mutable']
            )
        static = _cache_key(extra_key, payload, scopes, keys, wrappers)
        if self.varying and static in self.varying:
            payload['signature'] = _signature(variables, dynamic, donated, kwargs)
        try:
            y, mutated = self._call_learning_hashes(
                static, payload, scopes, templates, variables, keys, (dynamic, donated), kwargs
            )
        finally:
            static.payload = None
        signature = payload.get('signature')
        after = self.counters_after.get(static if signature is None else (static, signature))
        if after is not None:
            for c, a in zip(payload['counters'], after):
                c.clear()
                c.update(_pack.copy_counters(a))
        for s, m in zip(scopes, mutated):
            if m:
                _pack.write_back(s, (m,))
        return y

    def _admitted(self, variables: tuple, keys: tuple) -> tuple[tuple, tuple]:
        """The collections ``self.variables`` admits and the keys of the streams
        ``self.rngs`` admits, per scope."""
        if self.variables is not True:
            variables = tuple(_pack.admitted_collections(variables, self.variables))
        if self.rngs is not True:
            keys = tuple(_pack.admitted_streams(keys, self.rngs))
        return variables, keys

    def _call_learning_hashes(
        self, static, payload, scopes, templates, variables, keys, dynamic, kwargs
    ):
        """Call the compiled function, first learning which path hashes it needs if unknown.

        Returns ``(y, mutated variables)``. Where JAX does more than look up a cached
        program (a first call traces; a differentiating or batching trace linearizes
        or batches the program), the call runs at the bottom of a fresh interpreter
        stack chunk (see ``_stack.py``), so its speed does not depend on how deep the
        model's module calls are.
        """
        needed = self.needed.get(static)
        args = (needed, static, payload, scopes, templates, variables, keys, dynamic, kwargs)
        if needed is None or _transformed(dynamic[0]):
            return on_fresh_chunk(self._learn_and_call, *args)
        return self._learn_and_call(*args)

    def _learn_and_call(
        self, needed, static, payload, scopes, templates, variables, keys, dynamic, kwargs
    ):
        """The call of :meth:`_call_learning_hashes` (``needed``: what it knows so far)."""
        known = needed is not None
        try:
            if not known:
                if any(s.flags.get('initializing') for s in scopes):
                    # Init draws random numbers: learn which at once (no aborted trace).
                    raise _HashesNeeded
                # First call: assume the function draws no random numbers (apply
                # usually doesn't), so a single trace suffices.
                needed = _NO_HASHES
            result = self._call(
                static, payload, needed, templates, variables, keys, dynamic, kwargs
            )
        except _HashesNeeded as e:
            if e.owner is not None and e.owner is not self:
                raise  # an enclosing nn.jit's table: that one learns
        else:
            if not known:
                self.needed[static] = needed
            return result
        # It draws from paths not known yet: learn them (outside the handler, so that an
        # error of the user's code raised while learning is not chained to ours).
        if known:
            # An earlier trace learnt other paths: the rng use depends on the shapes,
            # and so do the counters after the call.
            self.varying.add(static)
            payload['signature'] = _signature(variables, *dynamic, kwargs)
        payload['index'] = None
        jax.eval_shape(
            lambda v, k, d, kw: self.run(
                _Static(('discover',) + static.key, payload), v, k, None, *d, kw
            ),
            variables,
            keys,
            dynamic,
            kwargs,
        )
        seen = payload.pop('seen')
        if known:  # the positions known so far stay; the new paths go after them
            seen = needed[0] + tuple(s for s in seen if s not in needed[1])
        needed = (seen, {item: i for i, item in enumerate(seen)}) if seen else _NO_HASHES
        try:
            result = self._call(
                static, payload, needed, templates, variables, keys, dynamic, kwargs
            )
        except _HashesNeeded as missed:
            if missed.owner is not self:
                raise
            stream, path = missed.stream, missed.items[1]
        else:
            self.needed[static] = needed
            return result
        raise TransformArgumentError(
            f'nn.jit: rng stream "{stream}" was drawn at {path}, which a trace of the same '
            'call just before did not draw; the jitted function must draw the same random '
            'numbers whenever it is traced with the same arguments (no Python state '
            'deciding it).'
        )

    def _call(self, static, payload, needed, templates, variables, keys, dynamic, kwargs):
        """Call the compiled function with the hashes of ``needed`` for the caller's streams."""
        seen, payload['index'] = needed
        # No path hashes needed (apply, usually): no argument for them, so the
        # call's equation has no constant input to trace, differentiate and lower.
        hashes = _path_hashes(seen, templates) if seen else None
        return self.compiled(static, variables, keys, hashes, *dynamic, kwargs)


# Numbers the calls that cannot share a compiled function key on.
_CALLS = itertools.count()

# The tracer of a trace that stages operations into a program (jit, make_jaxpr).
_STAGING: Any = getattr(pe, 'DynamicJaxprTracer', None)


def _transformed(args: tuple) -> bool:
    """Whether an argument is a tracer of a trace that transforms rather than stages
    (``grad``, ``jvp``, ``vmap``): binding the compiled function there runs JAX's rule
    for it (a linearization, a batching), cached only per pattern of arguments."""
    return any(isinstance(a, jax.core.Tracer) and type(a) is not _STAGING for a in args)


# (seen, index) of a function that draws no random numbers.
_NO_HASHES: tuple = ((), {})


def _signature(*trees: Any) -> tuple:
    """The shapes and dtypes of the arrays of a call (what its trace may depend on)."""
    return tuple(
        (np.shape(leaf), str(getattr(leaf, 'dtype', type(leaf).__name__)))
        for leaf in jax.tree_util.tree_leaves(trees)
    )


def _split_donated(dynamic: tuple, static_args: dict, donate: frozenset) -> tuple:
    """``(kept, donated, positions)``: the traced arguments apart from the donated ones
    (``donate`` counts the caller's arguments, static ones included), and where each
    donated one sits among the traced arguments."""
    kept, donated, at = [], [], []
    position = 0
    for i in range(len(dynamic) + len(static_args)):
        if i in static_args:
            continue
        arg = dynamic[position]
        if i in donate:
            donated.append(arg)
            at.append(position)
        else:
            kept.append(arg)
        position += 1
    return tuple(kept), tuple(donated), tuple(at)


def _merge_donated(kept: tuple, donated: tuple, at: tuple) -> tuple:
    out = list(kept)
    for position, arg in zip(at, donated):
        out.insert(position, arg)
    return tuple(out)


def _inner_scopes(p: dict, variables, keys, counters, table: _HashTable) -> tuple:
    """The detached scopes ``fn`` sees inside the trace, one per lifted scope."""
    return tuple(
        detached_scope(
            name=name,
            path=path,
            variables=v,
            mutable=mutable,
            rngs={n: _TableRngStream(k, n, (), table, slot) for n, k in ks.items()},
            rng_counters=c,
            flags=flags,
        )
        for slot, (name, path, v, mutable, ks, c, flags) in enumerate(
            zip(p['name'], p['path'], variables, p['mutable'], keys, counters, p['flags'])
        )
    )


def _payload(extra_obj, multi: bool, scopes: tuple, static_args, static_kwargs) -> dict:
    """What the trace reads besides its traced arguments (not part of the cache key)."""
    if multi:
        path = tuple(s.path for s in scopes)
        name = tuple(s.name for s in scopes)
        counters = tuple(s.rng_counters for s in scopes)
        mutable = tuple(s.mutable for s in scopes)
        flags = tuple(dict(s.flags) for s in scopes)
    else:
        (s,) = scopes
        path, name, counters, mutable = (s.path,), (s.name,), (s.rng_counters,), (s.mutable,)
        flags = (dict(s.flags),)
    return {
        'extra': extra_obj,
        'multi': multi,
        'path': path,
        'name': name,
        'counters': counters,
        'mutable': mutable,
        'flags': flags,
        'static_args': static_args,
        'static_kwargs': static_kwargs,
        'index': None,
    }


def _cache_key(extra_key, payload: dict, scopes: tuple, keys: tuple, wrappers) -> _Static:
    """What decides a trace (the path hashes aside): one compiled function per value."""
    if payload['multi']:
        base = (
            extra_key,
            True,
            tuple(len(s.path) for s in scopes),
            tuple(tuple(sorted(k)) for k in keys),
            _hashable(payload['counters']),
            _hashable(payload['mutable']),
            _hashable(payload['flags']),
        )
    else:
        (scope,) = scopes
        (key_dict,) = keys
        base = (
            extra_key,
            False,
            len(scope.path),
            tuple(sorted(key_dict)) if key_dict else (),
            _hashable(payload['counters'][0]),
            _hashable(payload['mutable'][0]),
            _hashable(payload['flags'][0]),
        )
    base += (
        _hashable(payload['static_args']) if payload['static_args'] else (),
        _hashable(payload['static_kwargs']) if payload['static_kwargs'] else (),
        wrappers,
    )
    if any(s.reservations for s in scopes) if payload['multi'] else scopes[0].reservations:
        # A method lifted from a compact method sees the names given out so far
        # (`_module_lift`): they decide the names inside.
        base += (tuple(frozenset(s.reservations) for s in scopes),)
    try:
        return _Static(base, payload)  # hashes the key once, for every lookup of this call
    except TypeError:
        # As in Flax (JAX's jit), a static argument must hash.
        _check_static_hashable(payload['static_args'], payload['static_kwargs'])
        # Unhashable module fields: trace every call (a number never given out
        # again, unlike an id, which a later payload may reuse).
        return _Static(('unhashable', next(_CALLS)), payload)


def _check_static_hashable(static_args: dict, static_kwargs: dict) -> None:
    """Raise JAX's ``ValueError`` (its text first) for a static argument that cannot
    be hashed (lists and dicts are hashed by their contents, as before)."""
    for value in (*static_args.values(), *static_kwargs.values()):
        try:
            hash(_hashable(value))
        except TypeError as e:
            raise TransformArgumentError(
                'Non-hashable static arguments are not supported. An error occurred while '
                f'trying to hash an object of type {type(value)}, {value}. The error was:\n'
                f'TypeError: {e}\n(nn.jit: an argument named in static_argnums or '
                "static_argnames is part of the compiled function's key; pass arrays as "
                'traced arguments, not static ones.)'
            ) from None


def _path_hashes(seen: tuple, templates: list) -> Any:
    """The hash of each (stream, (slot, items)) a trace needs, for the caller's streams.

    Inside another ``nn.jit`` the caller's streams know their path only relative to
    that jit's boundary: their hashes come from its table, as traced values.
    """
    streams = [templates[slot][stream] for stream, (slot, _) in seen]
    if not any(isinstance(s, _TableRngStream) for s in streams):
        return np.array(
            [path_hash(s.path + items) for s, (_, (_, items)) in zip(streams, seen)],
            dtype=np.uint32,
        )
    return jnp.asarray(
        [
            s.table.lookup(s.stream, (s.slot, s.rel + items))
            if isinstance(s, _TableRngStream)
            else path_hash(s.path + items)
            for s, (_, (_, items)) in zip(streams, seen)
        ],
        dtype=jnp.uint32,
    ).reshape(len(seen))
