"""Hook specifications of linen-module, and the types their implementations return.

The dispatcher runs every wrapped Module method call (not ``setup``, not
``@nowrap`` helpers) through the **method-wrapping** hook; concerns that wrap a
call — profiling labels, ``intercept_methods``, ``capture_intermediates``,
tabulate's call records — are implementations of it in their own files.

The **profiling-name** hook derives the label a method call gets in profiles.

Neither hook is historic: both are called after every plugin is registered
(the dispatcher rebuilds its chain whenever plugins change).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from linen.core.hookspecs import hookspec

__all__ = [
    'MethodContext',
    'MethodWrapper',
    'WrapFunction',
    'linen_method_wrapper',
    'linen_profiling_name',
]


class MethodContext(Protocol):
    """What a wrapper learns about the call it wraps.

    Attributes:
      module: the bound Module instance (unbound for a wrapper with ``wraps_unbound``).
      method_name: the method's name, e.g. ``'__call__'``, ``'encode'``.
      method: the plain function of the method (not bound: ``method(module, ...)``).
    """

    module: Any
    method_name: str
    method: Callable


# wrap(next_fn, args, kwargs, context) -> result; returns (a function of)
# next_fn(*args, **kwargs), which runs the rest of the chain and the method.
WrapFunction = Callable[[Callable[..., Any], tuple, dict, MethodContext], Any]


@dataclasses.dataclass(frozen=True)
class MethodWrapper:
    """One wrapper of Module method calls, as a ``linen_method_wrapper`` implementation returns it.

    Equal wrappers (same functions and options) are interchangeable: lifted
    transforms key their trace caches on the active wrappers.

    >>> def log(next_fn, args, kwargs, context):
    ...     print('calling', context.method_name)
    ...     return next_fn(*args, **kwargs)
    >>> MethodWrapper(log).wraps_unbound
    False

    Attributes:
      wrap: ``wrap(next_fn, args, kwargs, context)``; it must return the result of
        ``next_fn(*args, **kwargs)`` (it may change the arguments or the result).
        ``context`` is a :class:`MethodContext`.
      at_boundary: optional, same signature as ``wrap``. Compiling transforms
        (``nn.jit``) run it outside the compiled function, around the whole
        compiled call (see :func:`linen.module.dispatch.call_at_boundary`): it
        does there what depends on the instance, and ``wrap``, on the
        transform's inner call of the same method, leaves that out. When every
        active wrapper has one, one compiled function serves all instances of a
        class.
      wraps_unbound: also wrap calls on unbound modules (Flax runs its
        interceptors there); by default those run the method directly.
      wraps_setup: also wrap the lazy ``setup`` call of a module whose class
        defines one (``method_name == 'setup'``, no arguments; Flax runs its
        interceptors there); by default ``setup`` runs directly.
      before_setup: on the first call of a module whose lazy ``setup`` has not
        run, run before it (only a leading run of such wrappers, outermost first,
        does): a wrapper that answers the call without ``next_fn`` (trace reuse
        runs it as a compiled program of a fresh clone) spares the module a
        ``setup`` it does not need; it runs when something needs it.
    """

    wrap: WrapFunction
    at_boundary: WrapFunction | None = None
    wraps_unbound: bool = False
    wraps_setup: bool = False
    before_setup: bool = False


@hookspec
def linen_method_wrapper() -> MethodWrapper | None:
    """A wrapper for Module method calls, or ``None`` while inactive.

    Called when the dispatcher (re)builds its cached wrapper chain — after a
    plugin is registered or unregistered, or after
    :func:`linen.module.invalidate_method_wrappers` — never per call. An
    implementation whose activation is context-local (a ContextVar) calls
    ``invalidate_method_wrappers()`` when it changes, and
    ``invalidate_method_wrappers(everywhere=True)`` for a process-wide change.

    Results are collected, not first-result: ``None`` results are dropped, the
    rest wrap every call, the first result outermost (pluggy order:
    later-registered and ``tryfirst`` implementations first). When no result
    remains the dispatcher calls methods directly, paying nothing for the hook.
    A plain callable result is taken as ``MethodWrapper(result)``.

    :return: a :class:`MethodWrapper`, or ``None``.
    """


@hookspec(firstresult=True)
def linen_profiling_name(module: Any, method_name: str, method: Callable) -> str | None:
    """The profiling label of ``module.method_name``.

    ``firstresult``: the call stops at the first non-``None`` result. linen-profiling's
    default (``trylast``) gives ``module.name or type(module).__name__`` plus
    ``.method_name`` unless it is ``__call__``; a user's implementation
    (``tryfirst``) returning a string overrides it, returning ``None`` falls
    through to the next implementation.

    :param module: the Module whose method is called (bound, or unbound).
    :param method_name: the method's name (``'__call__'``, ``'encode'``, ...).
    :param method: the method's plain function (``functools.partial`` objects are
        seen through by the default rule).
    :return: the label, or ``None`` to leave it to the next implementation.
    """
