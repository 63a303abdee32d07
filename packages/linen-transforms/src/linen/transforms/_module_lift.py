"""Applying lifted transforms to Module classes and to Module methods.

``nn.vmap(Dense, ...)`` makes a subclass (``VmapDense``) whose chosen methods
run their base implementation under the transform; ``@nn.remat`` above a method
does the same for one method. In both cases the method runs on a clone of the
module bound to the transform's inner scope, through the ordinary dispatcher.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax

from linen.core import Variable, errors
from linen.module import Module
from linen.module.dispatch import call_wrapped_method, mark_dispatched

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


def _is_module_or_variable(x: Any) -> bool:
    return isinstance(x, (Module, Variable))


def lift_method(fn: Callable, make_lifted: MakeLifted) -> Callable:
    """A method decorator: ``fn`` runs under the transform ``make_lifted`` builds."""
    is_compact = bool(getattr(fn, 'compact', False))
    method_name = getattr(fn, '__name__', 'method')

    @functools.wraps(fn)
    def lifted(self, *args, **kwargs):
        scope = self.scope
        if scope is None:
            raise errors.CallCompactUnboundModuleError(type(self).__name__, method_name)

        def body(inner_scope, *a, **k):
            clone = self.clone(parent=inner_scope)
            y = call_wrapped_method(clone, fn, method_name, is_compact, a, k)
            return _check_returns(y, method_name)

        return make_lifted(body)(scope, *args, **kwargs)

    return _mark(lifted)


def lift_class(
    transform_name: str,
    cls: type,
    make_lifted: MakeLifted,
    methods: Sequence[str] | None = None,
) -> type:
    """A subclass of ``cls`` whose ``methods`` (default ``__call__``) run under the transform."""
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise errors.TransformTargetError(cls)
    attrs: dict[str, Any] = {}
    for method_name in methods or ('__call__',):
        orig = getattr(cls, method_name)
        attrs[method_name] = _class_method(orig, method_name, make_lifted)
    attrs['__module__'] = cls.__module__
    attrs['__qualname__'] = f'{transform_name}{cls.__qualname__}'
    return type(f'{transform_name}{cls.__name__}', (cls,), attrs)


def _class_method(orig: Callable, method_name: str, make_lifted: MakeLifted) -> Callable:
    @functools.wraps(orig)
    def lifted(self, *args, **kwargs):
        scope = self.scope
        if scope is None:
            raise errors.CallCompactUnboundModuleError(type(self).__name__, method_name)

        def body(inner_scope, *a, **k):
            return _check_returns(orig(self.clone(parent=inner_scope), *a, **k), method_name)

        return make_lifted(body)(scope, *args, **kwargs)

    return _mark(lifted)


def lift(
    transform_name: str,
    target: Any,
    make_lifted: MakeLifted,
    methods: Sequence[str] | None = None,
) -> Any:
    """Dispatch on the target: a Module class, or a method (decorator use)."""
    if isinstance(target, type):
        return lift_class(transform_name, target, make_lifted, methods)
    if callable(target):
        return lift_method(target, make_lifted)
    raise errors.TransformTargetError(target)
