"""Hook specifications of linen-module.

The dispatcher runs every wrapped Module method call (not ``setup``, not
``@nowrap`` helpers) through the **method-wrapping** hook; concerns that wrap a
call — profiling labels, ``intercept_methods``, ``capture_intermediates``,
tabulate's call records — are implementations of it in their own files.

The **profiling-name** hook derives the label a method call gets in profiles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from linen.core.hookspecs import hookspec


class MethodContext(Protocol):
    """What a wrapper learns about the call it wraps."""

    module: Any  # the bound Module instance
    method_name: str  # e.g. '__call__', 'encode'
    method: Callable  # the undecorated function (also available as ``orig_method``)


# wrapper(next_fn, args, kwargs, context) -> result; must call next_fn(*args, **kwargs)
MethodWrapper = Callable[[Callable[..., Any], tuple, dict, MethodContext], Any]


@hookspec
def linen_method_wrapper() -> MethodWrapper | None:
    """Return a wrapper for Module method calls, or ``None`` while inactive.

    Called when the dispatcher (re)builds its cached wrapper chain — after a
    plugin is registered or unregistered, or after
    :func:`linen.module.invalidate_method_wrappers` — never per call. Results are
    collected (pluggy order: later-registered and ``tryfirst`` first); the first
    result is the outermost wrapper. When every implementation returns ``None``
    the dispatcher calls methods directly, paying nothing for the hook.

    A wrapper is ``wrapper(next_fn, args, kwargs, context)``; it must return the
    result of ``next_fn(*args, **kwargs)`` (it may change the arguments or the
    result). An implementation whose activation is context-local (a ContextVar)
    calls ``invalidate_method_wrappers()`` when it changes, and
    ``invalidate_method_wrappers(everywhere=True)`` for a process-wide change.

    A wrapper may carry an ``at_boundary`` attribute, a callable of the same
    signature that compiling transforms (``nn.jit``) run outside the compiled
    function (see :func:`linen.module.dispatch.call_at_boundary`): it does there
    what depends on the instance, and the wrapper, on the transform's inner call
    of the same method, leaves that out. When every active wrapper has one, one
    compiled function serves all instances of a class.
    """


@hookspec(firstresult=True)
def linen_profiling_name(module: Any, method_name: str, method: Callable) -> str | None:
    """The profiling label of ``module.method_name``; stops at the first non-None result.

    linen-profiling's default (``trylast``) gives ``module.name or
    type(module).__name__`` plus ``.method_name`` unless it is ``__call__``. A
    user's implementation (``tryfirst``) returning a string overrides it;
    returning ``None`` falls through to the next implementation.
    """
