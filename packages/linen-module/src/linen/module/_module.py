"""The dataclass ``Module``.

A Module subclass is a dataclass whose fields are its constructor
arguments (``parent`` and ``name`` are keyword-only and last). Public methods are
wrapped once, at class creation, by :func:`_wrap_method`; every call then goes
through :func:`_call_wrapped_method`, which does the Module bookkeeping (lazy
setup, compact state, the module stack) and hands the call to the wrapper chain
of the ``linen_method_wrapper`` hook — or calls it directly when no plugin wraps.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import typing
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import jax

from linen.core import Scope, Variable, errors
from linen.core.lifting import Filter, binding_variables, thaw
from linen.module import _adoption, _entry
from linen.module._adoption import (
    KEPT_AS_IS,
    NON_HOLDERS,
    adopt_field_submodules,
    clone_held_modules,
    freeze_attribute,
    might_hold_modules,
    register_submodules,
)
from linen.module._constructor import add_eq_and_hash, replace_dataclass_init
from linen.module._decorators import compact, compact_name_scope, nowrap
from linen.module._descriptors import guard_descriptors
from linen.module._dispatch import _call_wrapped_method, _wrap_method, run_setup
from linen.module._repr import module_repr
from linen.module._state import ModuleState, _stack
from linen.module._tabulate import tabulate_method
from linen.module.kw_only_dataclasses import inherit_kw_only

__all__ = [
    'Module',
    'compact',
    'nowrap',
    'compact_name_scope',
]


class _Unspecified:
    def __repr__(self) -> str:
        return '_unspecified_parent'

    def __reduce__(self):
        return (_get_unspecified, ())


_UNSPECIFIED = _Unspecified()
# What `del` on an attached module refuses: where linen keeps its binding.
_BOOKKEEPING = frozenset({'_state', 'scope', 'parent', 'name'})


def _get_unspecified():
    return _UNSPECIFIED


# Methods of the base class are API, never user methods to wrap; the set is
# filled in below, once Module itself exists.
_BASE_NAMES: frozenset[str] = frozenset()


def _wrap_compact_name_scope(fun: Callable) -> Callable:
    method_name = fun.__name__

    @functools.wraps(fun)
    def wrapped(self, *args, **kwargs):
        if self.scope is None:
            raise errors.CallCompactUnboundModuleError(type(self).__name__, method_name)
        if not self._state.setup_called:
            self._try_setup()
        sub = self._name_scopes.get(method_name)
        if sub is None:
            sub = _NameScope(parent=None)
            sub.__dict__['parent'] = _weak(self)
            sub.__dict__['name'] = method_name
            sub.__dict__['scope'] = self.scope.push(method_name, reuse=True)
            self._name_scopes[method_name] = sub
        return _call_wrapped_method(
            sub, lambda m, *a, **k: fun(self, *a, **k), method_name, True, args, kwargs
        )

    wrapped.method_handler_wrapped = True  # type: ignore[attr-defined]
    return wrapped


# ---------------------------------------------------------------------- Module

_weak = weakref.ref


class _ParentField:
    """The ``parent`` attribute: the instance ``__dict__`` holds a Module parent weakly.

    A data descriptor, so ``module.parent`` reads through it; the value stored
    in ``__dict__['parent']`` is a Scope, None, or a weak reference to the parent
    Module (None once that module is gone, as in Flax).
    """

    # replace_dataclass_init may write __dict__['parent'] directly (see _constructor)
    dict_backed = True

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return _UNSPECIFIED  # the dataclass field's default
        parent = obj.__dict__.get('parent')
        if type(parent) is weakref.ReferenceType:
            return parent()
        return parent

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__['parent'] = _weak(value) if isinstance(value, Module) else value


_PARENT_FIELD = _ParentField()


def _name_taken(parent: Module, pstate: ModuleState, name: str) -> bool:
    """Whether a new submodule of ``parent`` may not be called ``name``.

    The scope's reservations hold the names claimed during the current call of
    a compact method (they are cleared after it); a submodule that an earlier
    call of the compact method made is made again under its old name, as in Flax.
    """
    if name in parent.scope.reservations:
        return True
    if name not in pstate.children:
        return False
    return not (pstate.in_compact_method and name in pstate.compact_children)


if typing.TYPE_CHECKING:
    # Type checkers and IDEs see Module and its subclasses as dataclasses, so
    # ``MLP(4, name='mlp')`` has a signature; at run time the base is ``object``.
    @typing.dataclass_transform(field_specifiers=(dataclasses.field,))
    class _DataclassLike:
        # Attributes, not fields: the decorated base itself is no dataclass.
        scope: Scope | None
        _state: ModuleState

else:
    _DataclassLike = object


# The annotations of `name` a subclass may write (as a string, too, under
# `from __future__ import annotations`).
_NAME_ANNOTATIONS = ('str', str, str | None)


class Module(_DataclassLike):
    """Base class of all neural-network modules; subclasses are dataclasses.

    >>> import jax
    >>> import jax.numpy as jnp
    >>> import linen.nn as nn
    >>> class MLP(nn.Module):
    ...     features: tuple
    ...     @nn.compact
    ...     def __call__(self, x):
    ...         for f in self.features:
    ...             x = nn.relu(nn.Dense(f)(x))
    ...         return x
    >>> variables = MLP((3, 2)).init(jax.random.key(0), jnp.ones((1, 4)))
    >>> jax.tree_util.tree_map(jnp.shape, variables['params'])
    {'Dense_0': {'bias': (3,), 'kernel': (4, 3)}, 'Dense_1': {'bias': (2,), 'kernel': (3, 2)}}
    """

    if typing.TYPE_CHECKING:
        # Keyword-only fields every subclass gets (added by __init_subclass__).
        parent: Module | Scope | None = dataclasses.field(kw_only=True, default=None)
        name: str | None = dataclasses.field(kw_only=True, default=None)
        # Set on each subclass by __init_subclass__: the fields a user sets, and
        # instance __dict__ -> their values in one C call (None: no fields).
        _field_names: typing.ClassVar[tuple[str, ...]]
        _field_getter: typing.ClassVar[Callable[[dict], tuple] | None]

    # -- class creation --------------------------------------------------------

    def __init_subclass__(cls, kw_only: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get('__annotations__', {})
        if 'parent' in own or own.get('name', str) not in _NAME_ANNOTATIONS:
            raise errors.ReservedModuleAttributeError(own)
        if 'name' in own:
            # Flax lets a subclass annotate `name` as a string (optional or not): that
            # only describes the reserved keyword-only field, so the annotation, and any
            # default given with it, is dropped.
            del own['name']
            if 'name' in cls.__dict__:
                type.__delattr__(cls, 'name')
        _add_parent_and_name(cls)
        inherit_kw_only(cls)
        own_init = '__init__' in cls.__dict__
        # Flax's dataclass (eq=True, unsafe_hash=True, not frozen), its methods
        # made without compiling each one (see _constructor).
        dataclasses.dataclass(cls, repr=False, eq=False, kw_only=kw_only)  # type: ignore[call-overload]
        add_eq_and_hash(cls)
        if not own_init:
            replace_dataclass_init(cls)
        # As in Flax, `dataclasses.fields` lists parent and name after every field a
        # subclass adds (they are keyword-only, so __init__ does not depend on it).
        own_fields = cls.__dict__['__dataclass_fields__']
        for reserved in ('parent', 'name'):
            own_fields[reserved] = own_fields.pop(reserved)
        _wrap_methods(cls)
        guard_descriptors(cls)
        cls._field_names = tuple(
            f.name for f in dataclasses.fields(cls) if f.init and f.name not in ('parent', 'name')
        )
        names = cls._field_names
        cls._field_getter = (
            None
            if not names
            else operator.itemgetter(*names)
            if len(names) > 1
            else operator.itemgetter(names[0], names[0])
        )
        if 'parent' in cls.__dict__:
            # (the first dataclass of the hierarchy; subclasses inherit the descriptor)
            type.__setattr__(cls, 'parent', _PARENT_FIELD)

    # -- construction ----------------------------------------------------------

    def __post_init__(self) -> None:
        d = self.__dict__
        d['_state'] = ModuleState()
        d['scope'] = None
        parent = d['parent']
        if parent is _UNSPECIFIED:
            stack = _stack.modules
            parent = stack[-1] if stack else None
            d['parent'] = parent
        if parent is None:
            return
        # (a root scope first: every init and apply binds one, and Scope has no subclass)
        if type(parent) is Scope or not isinstance(parent, Module):
            if type(parent) is Scope or isinstance(parent, Scope):
                d['scope'] = parent
                getter = type(self)._field_getter
                if getter is not None and not NON_HOLDERS.issuperset(map(type, getter(d))):
                    adopt_field_submodules(self, d)
                d['_state'].initialized = True
                return
            raise errors.ModuleParentTypeError(type(self).__name__, type(parent).__name__)
        # The parent holds its children; a child holds its parent weakly (read
        # through the `parent` descriptor), so a bound tree has no reference
        # cycle and is freed with its binding, traced values included.
        d['parent'] = _weak(parent)
        pstate = parent._state
        if pstate.in_setup and d['name'] is None:
            # Named when assigned to an attribute in setup (`self.layers = [...]`).
            return
        if parent.scope is None:
            # The parent is unbound: this module is bound when the parent is.
            return
        if pstate.initialized and not (pstate.in_setup or pstate.in_compact_method):
            raise errors.AssignSubModuleError(type(self).__name__)
        name = d['name']
        pscope = parent.scope
        if name is None:
            prefix = type(self).__name__
            cursor = pstate.autoname_cursor.get(prefix, 0)
            name = f'{prefix}_{cursor}'
            # (_name_taken's first two tests inline: a name nobody has is the rule)
            while (name in pscope.reservations or name in pstate.children) and _name_taken(
                parent, pstate, name
            ):
                cursor += 1
                name = f'{prefix}_{cursor}'
            pstate.autoname_cursor[prefix] = cursor + 1
            d['name'] = name
        else:
            if type(name) is not str and not isinstance(name, str):
                # Flax's TypeError, its text verbatim (the unformatted "{name}" included)
                # for `except`/`match=` clauses written against Flax.
                raise TypeError(
                    f'The type of scope "{{name}}" should be string but it is {type(name)}. '
                    f'Module names must be strings, got {name!r} for {type(self).__name__}.'
                )
            if _name_taken(parent, pstate, name):
                raise errors.NameInUseError('submodule', name, type(parent).__name__)
        pstate.children[name] = self
        in_compact = pstate.in_compact_method
        if in_compact:
            pstate.compact_children.add(name)
        d['scope'] = pscope.push(name, reuse=in_compact)
        # One C-level pass over the field types when no field can hold a Module
        # (the usual case: a module made inline in a compact method, every call).
        getter = type(self)._field_getter
        if getter is not None and not NON_HOLDERS.issuperset(map(type, getter(d))):
            adopt_field_submodules(self, d)
        d['_state'].initialized = True

    def __getstate__(self) -> dict[str, Any]:
        # pickle and copy: the parent itself, not the weak reference to it
        state = dict(self.__dict__)
        parent = state.get('parent')
        if type(parent) is weakref.ReferenceType:
            state['parent'] = parent()
        return state

    # -- attributes ------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        state = self.__dict__.get('_state')
        if state is None or not state.in_setup:
            # Until it is attached or bound, a module is a plain dataclass: a
            # subclass's ``__post_init__`` sets attributes before calling super's.
            if state is None or not state.initialized or name.startswith('__'):
                object.__setattr__(self, name, value)
                return
            raise errors.SetAttributeFrozenModuleError(type(self).__name__, name, value)
        if name in type(self)._field_names or name in ('parent', 'name'):
            raise errors.SetAttributeInModuleSetupError()
        if might_hold_modules(value):
            value = register_submodules(self, name, value)
            if type(value) not in KEPT_AS_IS:
                value = freeze_attribute(value)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        state = d.get('_state')
        if state is None or not state.initialized:
            object.__delattr__(self, name)
            return
        if name in _BOOKKEEPING:
            raise AttributeError(
                f"Can't delete {name!r} of Module {type(self).__name__}: linen keeps the "
                "module's binding there. Make a new instance with `module.clone(...)`."
            )
        # As in Flax, where a Module is a plain dataclass: `del self.field` (in setup,
        # a compact method, anywhere) drops the instance's value, and reads then see
        # the class's default. linen's own readers (clone, the transforms' keys) take
        # fields from __dict__, so a default is written there; a field without one
        # is gone, and reading it raises AttributeError as in Flax.
        if name in type(self)._field_names:
            default = getattr(type(self), name, dataclasses.MISSING)
            if default is not dataclasses.MISSING:
                d[name] = default
                return
        object.__delattr__(self, name)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: setup may define the attribute.
        d = self.__dict__
        state = d.get('_state')
        if state is None and name in ('_state', 'scope'):
            raise errors.IncorrectPostInitOverrideError()
        if state is not None and not state.setup_called and d.get('scope') is not None:
            self._try_setup()
            if name in d:
                return d[name]
        # The class's own attributes only: `inspect.getattr_static(type(self), ...)`
        # would also find the metaclass's (`type.__dict__['__name__']`), whose
        # `__get__` raises TypeError on an instance, where Flax (and `getattr(m,
        # '__name__', None)`, which `jax.vmap(module)` does) expects AttributeError.
        descriptor = next(
            (klass.__dict__[name] for klass in type(self).__mro__ if name in klass.__dict__), None
        )
        if hasattr(descriptor, '__get__'):
            # A property (or other descriptor) exists but raised AttributeError, and
            # Python fell back to us: "no attribute" would hide the real failure.
            try:
                descriptor.__get__(self, type(self))
            except AttributeError as exc:
                raise errors.DescriptorAttributeError() from exc
        hint = ''
        if d.get('scope') is None and state is not None:
            hint = (
                ' Attributes defined in setup() exist only on bound modules: use it inside '
                '`init`/`apply`, or `module.bind(variables)`.'
            )
        raise AttributeError(f'"{type(self).__name__}" object has no attribute "{name}".{hint}')

    def __dir__(self) -> list[str]:
        # Attributes defined in setup are listed too (setup runs, as on access).
        self._try_setup()
        return sorted(set(super().__dir__()))

    # -- setup -----------------------------------------------------------------

    def setup(self) -> None:
        """Define submodules and variables; runs lazily, once, on first use of a bound module."""

    def _try_setup(self) -> None:
        state = self._state
        if state.setup_called or state.in_setup or self.scope is None:
            return
        if type(self).setup is Module.setup:
            # (fields holding Modules were adopted when the module was bound)
            state.setup_called = True
            return
        state.in_setup = True
        _stack.modules.append(self)
        try:
            run_setup(self, type(self).setup)
            state.setup_called = True
        finally:
            state.in_setup = False
            _stack.modules.pop()

    # -- variables -------------------------------------------------------------

    def _bound_scope(self, what: str) -> Scope:
        """The scope, or UnboundModuleError whose text starts as Flax's ``ValueError``."""
        scope = self.scope
        if scope is None:
            raise errors.UnboundModuleError(f"Can't {what}", type(self).__name__)
        return scope

    def param(self, name: str, init_fn: Callable, *init_args, unbox: bool = True, **init_kwargs):
        """A parameter in collection ``params``, created with ``init_fn(rng, *init_args)``."""
        scope = self.scope
        if scope is None:
            scope = self._bound_scope(f'create parameter "{name}" on unbound modules')
        state = self._state
        if not (state.in_compact_method or state.in_setup) and state.initialized:
            raise errors.InitializeVariableOutsideSetupError(
                'Parameters', name, type(self).__name__
            )
        if name in state.children and not isinstance(state.children[name], str):
            raise errors.NameInUseError('param', name, type(self).__name__)
        try:
            return scope.param(name, init_fn, *init_args, unbox=unbox, **init_kwargs)
        except errors.DuplicateScopeNameError as e:
            # The core's ValueError is Flax's core text; a Module reports Flax's Module one.
            if e.name != name:
                raise
            raise errors.NameInUseError('param', name, type(self).__name__) from None

    def variable(
        self,
        col: str,
        name: str,
        init_fn: Callable | None = None,
        *init_args,
        unbox: bool = True,
        **init_kwargs,
    ) -> Variable:
        """A :class:`Variable` of collection ``col``, created with ``init_fn(*init_args)``."""
        scope = self._bound_scope(f'create variable "{col}/{name}" on unbound modules')
        state = self._state
        if not (state.in_compact_method or state.in_setup) and state.initialized:
            raise errors.InitializeVariableOutsideSetupError(
                'Variables', f'{col}/{name}', type(self).__name__
            )
        if name in state.children and not isinstance(state.children[name], str):
            raise errors.NameInUseError('variable', name, type(self).__name__)
        try:
            return scope.variable(col, name, init_fn, *init_args, unbox=unbox, **init_kwargs)
        except errors.DuplicateScopeNameError as e:
            if e.name != name:
                raise
            raise errors.NameInUseError('variable', name, type(self).__name__) from None

    def has_variable(self, col: str, name: str) -> bool:
        return self._bound_scope('access variables on unbound modules').has_variable(col, name)

    def get_variable(self, col: str, name: str, default: Any = None) -> Any:
        return self._bound_scope('access variables on unbound modules').get_variable(
            col, name, default
        )

    def put_variable(self, col: str, name: str, value: Any) -> None:
        self._bound_scope('access variables on unbound modules').put_variable(col, name, value)

    def has_rng(self, name: str) -> bool:
        return self._bound_scope('query for RNGs on unbound modules').has_rng(name)

    def make_rng(self, name: str = 'params') -> jax.Array:
        """The next key of stream ``name``; falls back to ``'params'`` when it was not given."""
        return self._bound_scope('use RNGs on unbound modules').make_rng(name)

    def is_mutable_collection(self, col: str) -> bool:
        return self._bound_scope('check mutability on unbound modules').is_mutable_collection(col)

    def is_initializing(self) -> bool:
        """True inside ``init``/``init_with_output``."""
        return bool(
            self._bound_scope('check if running under init() on unbound modules').flags.get(
                'initializing', False
            )
        )

    @property
    def variables(self) -> dict[str, Any]:
        """``{collection: {name: value}}`` of this module and below."""
        return self._bound_scope('access variables on unbound modules').variables()

    @property
    def path(self) -> tuple[str, ...]:
        return self._bound_scope('access module paths on unbound modules.').path

    def sow(
        self,
        col: str,
        name: str,
        value: Any,
        reduce_fn: Callable = lambda xs, x: xs + (x,),
        init_fn: Callable = lambda: (),
    ) -> bool:
        """Add ``value`` to ``col/name`` if ``col`` is mutable; returns whether it was stored."""
        scope = self._bound_scope('store variables on unbound modules')
        if not scope.is_mutable_collection(col):
            return False
        if scope.has_variable(col, name):
            xs = scope.get_variable(col, name)
        else:
            scope.reserve(name, col)
            self._state.children[name] = col
            xs = init_fn()
        scope.put_variable(col, name, reduce_fn(xs, value))
        return True

    def perturb(self, name: str, value: Any, collection: str = 'perturbations') -> Any:
        """Add a zero-initialised variable to ``value`` so its gradient can be taken."""
        scope = self._bound_scope('store variables on unbound modules')
        if scope.is_mutable_collection(collection) and not scope.has_variable(collection, name):
            scope.reserve(name, collection)
            self._state.children[name] = collection
            scope.put_variable(collection, name, jax.tree_util.tree_map(_zeros_like, value))
        if collection in binding_variables(scope):
            if scope.has_variable(collection, name):
                old = scope.get_variable(collection, name)
                return jax.tree_util.tree_map(lambda a, b: a + b, value, old)
            raise errors.PerturbationNotFoundError(collection, name, '/'.join(map(str, scope.path)))
        return value

    # -- cloning and binding -----------------------------------------------------

    def clone(
        self,
        *,
        parent: Any = None,
        _deep_clone: bool | dict = False,
        _reset_names: bool = False,
        **updates: Any,
    ) -> Module:
        """A new unbound (or re-parented) instance with the same fields, updated by ``updates``.

        Fields whose Modules this module adopted hold what was given (the new
        instance adopts them itself). ``_deep_clone`` clones every Module its
        fields hold instead, whoever it is bound to (once each: a module held in two
        places stays one module), with its name; ``_reset_names`` forgets the names
        of those clones (not this module's own), as Flax does.
        """
        d = self.__dict__
        attrs = {f: d[f] for f in type(self)._field_names}
        attrs['name'] = d['name']
        if _deep_clone is False:
            origins = self._state.field_origins
            if origins is not None:
                attrs.update(origins)
        elif not NON_HOLDERS.issuperset(map(type, attrs.values())):
            cache = _deep_clone if isinstance(_deep_clone, dict) else {}
            clone_held_modules(attrs, cache, _reset_names)
        if updates:
            attrs.update(updates)
        return type(self)(parent=parent, **attrs)

    def copy(self, *, parent: Any = _UNSPECIFIED, name: str | None = None, **updates: Any):
        """A deep copy with ``updates``: the Modules in its fields are copied too.

        With ``parent`` unspecified the copy belongs to the current module, as at
        construction.
        """
        return self.clone(parent=parent, name=name, _deep_clone=True, **updates)

    def bind(self, variables: Mapping, *args, rngs: Any = None, mutable: Filter = False) -> Module:
        """A copy bound to ``variables`` for interactive use."""
        if not isinstance(self, Module):  # `MyModule.bind(variables)` on the class
            raise errors.InvalidInstanceModuleError()
        scope = _entry.bind_root(self, variables, rngs, mutable)
        return self.clone(parent=scope, _deep_clone=True)

    def unbind(self) -> tuple[Module, dict]:
        """``(unbound copy, variables)`` of a bound module."""
        if self.scope is None:
            raise errors.CallUnbindOnUnboundModuleError()
        self._try_setup()
        unbound = self.clone(parent=None, _deep_clone=True, _reset_names=True, name=None)
        return unbound, thaw(self.variables)

    # -- init / apply (the entry points: _entry.py) ----------------------------------

    apply = _entry.apply
    init_with_output = _entry.init_with_output
    init = _entry.init
    lazy_init = _entry.lazy_init
    module_paths = _entry.module_paths

    # Flax's summary table; linen-profiling provides it (see _tabulate.py).
    tabulate = tabulate_method

    # -- repr ----------------------------------------------------------------------

    def __repr__(self) -> str:
        return module_repr(self)

    @property
    def _name_scopes(self) -> dict:
        d = self.__dict__
        scopes = d.get('_compact_name_scopes')
        if scopes is None:
            scopes = d['_compact_name_scopes'] = {}
        return scopes


def _zeros_like(x):
    import jax.numpy as jnp

    return jnp.zeros_like(x)


def _add_parent_and_name(cls: type) -> None:
    for base in cls.__mro__[1:]:
        fields = getattr(base, '__dataclass_fields__', None)
        if fields is not None and 'parent' in fields:
            return
    annotations = cls.__dict__.get('__annotations__')
    if annotations is None:
        annotations = {}
        cls.__annotations__ = annotations
    annotations['parent'] = Any
    # An annotation object, not a string: `dataclasses` resolves a string through
    # `sys.modules[cls.__module__]`, which code run by `exec` (generators, notebook
    # tools) does not have.
    annotations['name'] = str | None
    cls.parent = dataclasses.field(  # type: ignore[attr-defined]
        default=_UNSPECIFIED, kw_only=True, repr=False, compare=False, hash=False
    )
    cls.name = dataclasses.field(default=None, kw_only=True)  # type: ignore[attr-defined]


def _wrap_methods(cls: type) -> None:
    # The names of the class's @compact_name_scope methods (Flax's class attribute).
    scoped = set(getattr(cls, '_compact_name_scope_methods', ()))
    for key, value in list(cls.__dict__.items()):
        if not isinstance(value, type(_wrap_methods)):  # plain functions only
            continue
        if key.startswith('__') and key != '__call__':
            continue
        if key == 'setup':
            setattr(cls, key, _guard_setup(value))
            continue
        if key in _BASE_NAMES:
            continue
        if getattr(value, 'nowrap', False) or getattr(value, 'method_handler_wrapped', False):
            continue
        if getattr(value, 'compact_name_scope', False):
            setattr(cls, key, _wrap_compact_name_scope(value))
            scoped.add(key)
        else:
            setattr(cls, key, _wrap_method(value))
            scoped.discard(key)  # an override without the decorator
    cls._compact_name_scope_methods = tuple(sorted(scoped))  # type: ignore[attr-defined]


def _guard_setup(setup: Callable) -> Callable:
    """``setup`` called by hand on an unbound module raises Flax's typed error."""

    @functools.wraps(setup)
    def guarded(self):
        if self.scope is None:
            raise errors.CallSetupUnboundModuleError(type(self).__name__)
        return setup(self)

    return guarded


_BASE_NAMES = frozenset(k for k in Module.__dict__ if not k.startswith('__'))
_adoption.Module = Module  # (see linen.module._adoption)
_entry.Module = Module  # (and linen.module._entry)
# Functions bound in the class body from other files read as Module's own methods.
for _name in ('apply', 'init_with_output', 'init', 'lazy_init', 'module_paths', 'tabulate'):
    _fn = Module.__dict__[_name]
    _fn.__name__, _fn.__qualname__ = _name, f'Module.{_name}'
del _name, _fn


class _NameScope(Module):
    """The anonymous module a ``@compact_name_scope`` method runs in."""


# ---------------------------------------------------------------- free functions
