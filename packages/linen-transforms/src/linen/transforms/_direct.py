"""The ``(mdl, *operands)`` functions of ``nn.cond``, ``nn.switch`` and ``nn.while_loop``.

As in Flax, these transforms lift more than ``mdl``'s scope: bound Modules and
Variables among the operands (or in ``while_loop``'s carry) and bound Modules held
in ``mdl``'s fields join the transform as further scopes (Flax's multi-scope
lifting, see ``_args.py``). Inside, each function gets a clone of ``mdl`` bound to
the inner scope, and the operands' Modules and Variables come back bound to
theirs, so variables they create or update inside a branch or the loop body are
written back like ``mdl``'s own. A bound method of any Module is taken as its
function (Flax normalises ``self.left`` to ``type(self).left``) and runs on the
clone of ``mdl``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from linen.core import errors
from linen.module import Module
from linen.module.dispatch import call_wrapped_method
from linen.transforms import _args
from linen.transforms._module_lift import _check_returns, check_setup, unbound_stand_in
from linen.transforms.errors import TransformArgumentError


class DirectLift(NamedTuple):
    """What a control-flow transform needs: the scopes, the operands, one body per fn.

    ``scopes`` is ``mdl``'s scope alone, or a tuple with the lifted objects' scopes
    after it; each body takes ``(scopes_inside, *operands)``.
    """

    scopes: Any
    operands: tuple
    bodies: list


def _function_of(fn: Callable) -> Callable:
    if isinstance(getattr(fn, '__self__', None), Module):
        return fn.__func__
    return fn


def lift_direct(
    fns: Sequence[Callable], mdl: Any, operands: tuple, transform: str = 'lifted'
) -> DirectLift:
    """Lift ``mdl`` and the Modules and Variables among ``operands`` for ``fns``
    (the functions of the transform named ``transform``)."""
    for fn in fns:
        # Flax's checks, in its order and with its texts (ValueErrors).
        if not callable(fn):
            raise TransformArgumentError(
                f'transform target must be callable (nn.{transform} got {fn!r}; pass '
                'functions or Module methods taking the module first).'
            )
        if isinstance(fn, type) and issubclass(fn, Module):
            raise TransformArgumentError(
                f'The {transform} transform can only be applied on a Module method. That '
                'is function that takes a Module instance as its first arg. '
                f'(got the class {fn.__name__}: pass a function such as '
                f'`lambda mdl, x: {fn.__name__}()(x)`.)'
            )
    if isinstance(mdl, Module) and mdl.scope is None and transform in ('cond', 'switch'):
        # As Flax, on an unbound module the branches run with nothing to lift.
        mdl = unbound_stand_in(mdl)
    scope = mdl.scope if isinstance(mdl, Module) else None
    if scope is None:
        raise errors.CallCompactUnboundModuleError(type(mdl).__name__, 'lifted function')
    check_setup(mdl)
    operands, _, objects = _args.extract(tuple(operands), {})
    fields = _args.extract_fields(mdl, objects)
    scopes = (scope, *_args.scopes_of(objects)) if objects else scope
    bodies = [_body(_function_of(fn), mdl, objects, fields) for fn in fns]
    return DirectLift(scopes, operands, bodies)


def module_body(fn: Callable, mdl: Any, objects: list, fields: dict) -> Callable:
    """``body(scopes, *operands)`` running ``fn`` on a clone of ``mdl`` bound to
    ``scopes[0]``, the lifted ``objects`` (operands' and fields') rebound to the rest."""
    return _body(_function_of(fn), mdl, objects, fields)


def _body(fn: Callable, mdl: Any, objects: list, fields: dict) -> Callable:
    name = getattr(fn, '__name__', 'fn')

    def body(scope_tree, *operands):
        updates = {}
        inner = scope_tree
        if objects:
            inner, others = scope_tree[0], scope_tree[1:]
            operands, _ = _args.restore(operands, {}, objects, others)
            updates = _args.restore_fields(fields, objects, others)
        clone = mdl.clone(parent=inner, **updates)
        # Compact mode: submodules ``fn`` creates belong to the clone (as in Flax).
        y = call_wrapped_method(clone, lambda m, *a: fn(m, *a), name, True, operands, {})
        return _check_returns(y, name)

    return body
