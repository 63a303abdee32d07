"""The free functions of the Module API: ``apply``, ``init``, ``init_with_output``,
``merge_param`` and ``share_scope``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from linen.core import DenyList, errors, union_filters
from linen.core import apply as core_apply
from linen.core import init as core_init
from linen.core.errors import MergeParamError as MergeParamError
from linen.core.lifting import Filter
from linen.module._entry import scope_fn
from linen.module._module import Module

__all__ = ['apply', 'init', 'init_with_output', 'merge_param', 'share_scope', 'MergeParamError']


def apply(
    fn: Any,
    module: Module | None = None,
    mutable: Filter = False,
    capture_intermediates: bool | Callable = False,
    method: Any = None,
):
    """Functionalise a module method (or ``fn(module, *args)``): ``apply(...)(variables, *args)``."""
    if isinstance(fn, Module):
        module, fn = fn, method
    if module is None:
        raise errors.InvalidInstanceModuleError()
    if isinstance(module, type):
        raise errors.InvalidInstanceModuleError()
    if capture_intermediates:
        mutable = union_filters(mutable, 'intermediates') if mutable is not True else True
    return core_apply(scope_fn(module, fn, capture_intermediates), mutable=mutable)


def init_with_output(
    fn: Any,
    module: Module | None = None,
    mutable: Filter = DenyList('intermediates'),
    capture_intermediates: bool | Callable = False,
    method: Any = None,
):
    """Functionalise ``init``: ``init_with_output(...)(rngs, *args)`` -> ``(y, variables)``."""
    if isinstance(fn, Module):
        module, fn = fn, method
    if module is None or isinstance(module, type):
        raise errors.InvalidInstanceModuleError()
    if capture_intermediates:
        mutable = union_filters(mutable, 'intermediates') if mutable is not True else True
    return core_init(
        scope_fn(module, fn, capture_intermediates), mutable=mutable, flags={'initializing': True}
    )


def init(
    fn: Any,
    module: Module | None = None,
    mutable: Filter = DenyList('intermediates'),
    capture_intermediates: bool | Callable = False,
    method: Any = None,
):
    """Functionalise ``init``: ``init(...)(rngs, *args)`` -> variables."""
    run = init_with_output(fn, module, mutable, capture_intermediates, method)

    @functools.wraps(run)
    def wrapper(rngs, *args, **kwargs):
        return run(rngs, *args, **kwargs)[1]

    return wrapper


def merge_param(name: str, a: Any, b: Any) -> Any:
    """The one of ``a`` (attribute) and ``b`` (call argument) that is set; exactly one must be."""
    a_set, b_set = a is not None, b is not None
    # Flax's texts, whole: code and tests match them literally, and each says what to do.
    if a_set and b_set:
        raise errors.MergeParamError(
            f'Parameter "{name}" was passed to the constructor and at call time. '
            'Should be passed just once.'
        )
    if not a_set and not b_set:
        raise errors.MergeParamError(
            f'Parameter "{name}" must be passed to the constructor or at call time.'
        )
    return a if a_set else b


def share_scope(module: Module, other: Module, /) -> None:
    """Make two modules share one scope, so their variables live at one path (Flax's rule).

    ``other`` takes ``module``'s scope when it is a descendant of ``module`` (a
    child defined in its ``setup``); otherwise ``module`` takes ``other``'s (a
    wrapper around a module defined elsewhere keeps that module's path). Children
    of the module whose scope changes move along with it.
    """
    if module.scope is None or other.scope is None:
        raise errors.CallShareScopeOnUnboundModuleError()
    if _is_descendant(other.scope, module.scope):
        moved, new_scope = other, module.scope
    else:
        moved, new_scope = module, other.scope
    old_scope = moved.scope
    object.__setattr__(moved, 'scope', new_scope)
    for child in moved._state.children.values():
        scope = getattr(child, 'scope', None)
        if isinstance(child, Module) and scope is not None and scope.parent is old_scope:
            if isinstance(scope.name, str):
                new_scope.reserve(scope.name)
            # Its rng streams stay those of its old path (Flax derives them when
            # the scope is made); its variables move.
            scope.rngs  # noqa: B018  (derives and keeps them now)
            scope.parent = new_scope
            scope.path = new_scope.path + (scope.name,)
            _follow_parent_paths(child)


def _follow_parent_paths(module: Module) -> None:
    """Re-derive the paths of the scopes already made below ``module`` from its own.

    A scope keeps its path as a tuple made with it; field submodules are bound (given
    their scopes) with their owner, so a moved child's own children, and theirs, would
    keep the old path. Their rng streams derive from their parents' when first asked,
    so they need nothing.
    """
    parent = module.scope
    for child in module._state.children.values():
        scope = getattr(child, 'scope', None)
        if isinstance(child, Module) and scope is not None and scope.parent is parent:
            scope.path = parent.path + (scope.name,)
            _follow_parent_paths(child)


def _is_descendant(scope: Any, ancestor: Any) -> bool:
    while scope is not None:
        if scope is ancestor:
            return True
        scope = scope.parent
    return False
