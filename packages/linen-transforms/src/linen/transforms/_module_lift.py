"""Applying lifted transforms to Module classes and to Module methods.

``nn.vmap(Dense, ...)`` makes a subclass (``VmapDense``) whose chosen methods
run their base implementation under the transform; ``@nn.remat`` above a method
does the same for one method. In both cases the method runs on a clone of the
module bound to the transform's inner scope, through the ordinary dispatcher.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from linen.core import Variable, errors
from linen.core.lifting import RngStream, detached_scope
from linen.module import Module
from linen.module.dispatch import (
    call_wrapped_method,
    ensure_setup,
    field_names,
    in_compact_method,
    mark_dispatched,
    setup_called,
)
from linen.transforms import _args, _pack
from linen.transforms.errors import TransformArgumentError

# make_lifted(body) -> lifted(scope, *args, **kwargs); body(scope, *args, **kwargs)
MakeLifted = Callable[[Callable], Callable]


def _mark(fn: Callable) -> Callable:
    # The dispatcher must not wrap these: the call inside the transform goes
    # through it, on the clone.
    return mark_dispatched(fn)


def _check_returns(y: Any, method_name: str) -> Any:
    """Modules and Variables cannot leave a transform (their scope ends there), as in Flax."""
    for leaf in jax.tree_util.tree_leaves(y, is_leaf=_is_module_or_variable):
        if _is_module_or_variable(leaf):
            raise errors.TransformedMethodReturnValueError(method_name)
    return y


_CHECKED = '_linen_transforms_setup_checked'


def check_setup(module: Any) -> None:
    """Run ``module``'s ``setup`` once, abstractly, before it enters a transform (as Flax).

    Errors of ``setup`` (a name used twice, a typo) then surface outside any trace.
    The run uses a clone on a throwaway scope under ``jax.eval_shape``: nothing it
    creates is kept. Flax does the same, so ``setup`` runs as many times here as
    there (programs that count its calls see Flax's numbers).
    """
    d = module.__dict__
    if d.get(_CHECKED) or setup_called(module):
        return
    d[_CHECKED] = True  # an instance attribute outside the dataclass fields

    def run(_):
        root = detached_scope(
            name=None,
            path=(),
            variables={},
            mutable=True,
            rngs={'params': RngStream(jax.random.key(0))},
            rng_counters={},
            flags={},
        )
        clone = module.clone(parent=root)
        call_wrapped_method(clone, lambda m: None, 'setup', False, (), {})
        return 0

    jax.eval_shape(run, 0)


def _is_module_or_variable(x: Any) -> bool:
    return isinstance(x, (Module, Variable))


def lift_method(fn: Callable, make_lifted: MakeLifted, multi_scope: bool = False) -> Callable:
    """A method decorator: ``fn`` runs under the transform ``make_lifted`` builds.

    As in Flax, ``fn`` runs in compact mode when it is ``@compact`` or when the module
    calling it is inside a compact method (``nn.vmap(lambda m, x: nn.Dense(2)(x))``
    called from ``__call__``). With ``multi_scope``, bound Modules and Variables among
    the arguments are lifted too (see ``_args.py``).
    """
    is_compact = bool(getattr(fn, 'compact', False))
    method_name = getattr(fn, '__name__', 'method')

    @functools.wraps(fn)
    def lifted(self, *args, **kwargs):
        compact = is_compact or in_compact_method(self)
        if not compact and self.scope is None:
            return lifted(unbound_stand_in(self), *args, **kwargs)

        def run(clone, a, k):
            return call_wrapped_method(clone, fn, method_name, compact, a, k)

        return _run_lifted(self, method_name, make_lifted, multi_scope, run, args, kwargs)

    return _mark(lifted)


def unbound_stand_in(module: Any) -> Any:
    """``module`` bound to an empty, immutable root scope with no rng streams.

    Flax runs a transformed method that is not compact on an unbound module (no
    variables to lift: ``nn.remat(Block)()(x)`` outside ``apply`` runs ``Block``
    under ``jax.checkpoint``); the stand-in lets the lifting run the same way, with
    nothing to lift and nothing written back.
    """
    return module.bind({})


def _run_lifted(self, method_name, make_lifted, multi_scope, run, args, kwargs, base=None):
    """Run ``run(clone, args, kwargs)`` under the transform, on a clone of ``self``
    bound to the inner scope (and, with ``multi_scope``, the Modules and Variables
    among the arguments and fields lifted alongside).

    ``base``: the class a transformed class was made from. As in Flax, the clone is an
    instance of it, so a transformed method calling another one (``self.helper(x)``
    from ``__call__``) runs it plainly instead of transforming it a second time.
    """
    scope = self.scope
    if scope is None:
        raise errors.CallCompactUnboundModuleError(type(self).__name__, method_name)
    check_setup(self)
    # Called from the module's compact method, the names it gave out so far stay
    # taken inside (as in Flax): a submodule made inside may not take one, and an
    # automatic name skips them. Names taken inside are not handed back.
    reserved = scope.reservations if scope.reservations and in_compact_method(self) else None
    objects: list = []
    fields: dict = {}
    if multi_scope:
        args, kwargs, objects = _args.extract(args, kwargs)
        fields = _args.extract_fields(self, objects)

    def body(inner_scope, *a, **k):
        updates = {}
        if objects:
            inner_scope, others = inner_scope[0], inner_scope[1:]
            a, k = _args.restore(a, k, objects, others)
            updates = _args.restore_fields(fields, objects, others)
        clone = inner_clone(self, inner_scope, updates, base)
        if reserved is not None:
            reserve_callers_names(clone, reserved)
        return _check_returns(run(clone, a, k), method_name)

    scopes = (scope, *_args.scopes_of(objects)) if objects else scope
    return make_lifted(body)(scopes, *args, **kwargs)


def inner_clone(module: Any, inner_scope: Any, updates: dict, base: type | None) -> Any:
    """``module`` bound to a transform's inner scope, its fields updated by ``updates``.

    ``base``: the class a lifted class transform was applied to, whose instance the
    clone is (as in Flax); None keeps the module's own class. Submodules the module
    adopted are adopted afresh (see :func:`readopted`).
    """
    if base is None:
        fresh = readopted(module, {f: module.__dict__[f] for f in field_names(type(module))})
        return module.clone(parent=inner_scope, **{**fresh, **updates})
    attrs = {f: module.__dict__[f] for f in field_names(base)}
    attrs.update(readopted(module, attrs))
    attrs.update(updates)
    return base(parent=inner_scope, name=module.__dict__['name'], **attrs)


def reserve_callers_names(clone: Any, reserved: dict) -> None:
    """The names the caller's compact method gave out so far, taken in ``clone``'s scope.

    ``clone``'s ``setup`` runs first: its submodules take their own names again
    inside the transform (as Flax lets a transformed ``setup`` do).
    """
    ensure_setup(clone)
    _pack.copy_reservations(reserved, clone.scope)


def readopted(module: Any, attrs: dict) -> dict:
    """The fields of ``attrs`` holding submodules ``module`` adopted, as unbound copies.

    A submodule given in a dataclass field (``C(A())``, or ``Vmap(sub=nn.Dense(3))``
    built in a parent's ``setup``) is adopted by the module that holds it. Inside a
    transform the clone of that module adopts an unbound copy again, so the
    submodule's variables live under the transformed scope (mapped, scanned, ...)
    as in Flax. Copies are made per trace: adoption binds them.
    """
    out = {}
    for name, value in attrs.items():
        if isinstance(value, Module):
            if value.parent is module:
                out[name] = _unbound_copy(value)
        elif isinstance(value, (list, tuple, Mapping)) and value:

            def fresh(x):
                if isinstance(x, Module) and x.parent is module:
                    return _unbound_copy(x)
                return x

            leaves = jax.tree_util.tree_leaves(value, is_leaf=_is_module_or_variable)
            if any(isinstance(x, Module) and x.parent is module for x in leaves):
                out[name] = jax.tree_util.tree_map(fresh, value, is_leaf=_is_module_or_variable)
    return out


def _unbound_copy(module: Any) -> Any:
    attrs = {f: module.__dict__[f] for f in field_names(type(module))}
    return module.clone(parent=None, **readopted(module, attrs))


def lift_class(
    transform_name: str,
    cls: type,
    make_lifted: MakeLifted,
    methods: Sequence[str] | None = None,
    multi_scope: bool = False,
) -> type:
    """A subclass of ``cls`` whose ``methods`` (default ``__call__``) run under the transform."""
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise errors.TransformTargetError(cls)
    check_methods(methods)
    attrs: dict[str, Any] = {}
    for method_name in methods or ('__call__',):
        orig = getattr(cls, method_name)
        attrs[method_name] = _class_method(orig, method_name, make_lifted, multi_scope, cls)
    attrs['__module__'] = cls.__module__
    attrs['__qualname__'] = f'{transform_name}{cls.__name__}'  # as Flax names it
    return type(f'{transform_name}{cls.__name__}', (cls,), attrs)


def check_methods(methods: Any) -> None:
    """``methods=`` of a transform applied to a Module class: None, a tuple, list or dict
    of method names, as Flax requires (a string would be read letter by letter)."""
    if methods is not None and not isinstance(methods, (tuple, list, Mapping)):
        raise TransformArgumentError(
            'transform methods argument must be None, tuple, list, or dict. '
            f'(got {methods!r}: name the methods to transform in a tuple, '
            "e.g. methods=('__call__', 'encode'))"
        )


def _class_method(
    orig: Callable,
    method_name: str,
    make_lifted: MakeLifted,
    multi_scope: bool = False,
    base: type | None = None,
) -> Callable:
    is_compact = bool(getattr(orig, 'compact', False))

    @functools.wraps(orig)
    def lifted(self, *args, **kwargs):
        if not is_compact and self.scope is None:
            return lifted(unbound_stand_in(self), *args, **kwargs)

        def run(clone, a, k):
            return orig(clone, *a, **k)

        return _run_lifted(
            self, method_name, make_lifted, multi_scope, run, args, kwargs, base=base
        )

    return _mark(lifted)


def lift(
    transform_name: str,
    target: Any,
    make_lifted: MakeLifted,
    methods: Sequence[str] | None = None,
    multi_scope: bool = False,
) -> Any:
    """Dispatch on the target: a Module class, or a method (decorator use).

    ``multi_scope``: the transform accepts a tuple of scopes, so Module and Variable
    arguments are lifted with the module's own scope.
    """
    if isinstance(target, type):
        return lift_class(transform_name, target, make_lifted, methods, multi_scope)
    if isinstance(target, Module):  # an instance: Flax's TransformTargetError
        raise errors.TransformTargetError(target)
    if is_partial_module_class(target):
        lifted = lift_class(transform_name, target.func, make_lifted, methods, multi_scope)
        return functools.partial(lifted, *target.args, **target.keywords)
    if callable(target):
        return lift_method(target, make_lifted, multi_scope)
    raise errors.TransformTargetError(target)


def is_partial_module_class(target: Any) -> bool:
    """``functools.partial(nn.Dense, 3)``: transformed as the class, arguments kept (as Flax)."""
    return (
        isinstance(target, functools.partial)
        and isinstance(target.func, type)
        and issubclass(target.func, Module)
    )


def lift_transform(
    transform: Callable,
    target: Any,
    *trafo_args,
    methods: Sequence[str] | None = None,
    **trafo_kwargs,
) -> Any:
    """Apply a functional (scope-level) transform to a Module class or method.

    ``transform(fn, *trafo_args, **trafo_kwargs)`` takes ``fn(scope, *args)`` and returns
    a function of the same form (the ``lift`` transforms do). As in Flax, a transformed
    class is named after the transform function, capitalised:
    ``lift_transform(lift.checkpoint, Block)`` gives ``CheckpointBlock``.
    """

    def make(body):
        return transform(body, *trafo_args, **trafo_kwargs)

    name = getattr(transform, '__name__', 'Transform').capitalize()
    return lift(name, target, make, methods, multi_scope=True)
