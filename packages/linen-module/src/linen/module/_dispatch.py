"""The method dispatcher and its wrapper chain.

Every wrapped Module method enters :func:`_call_wrapped_method`, which does the
Module bookkeeping (lazy setup, compact state, the module stack) and runs the
call through the chain of method wrappers.

Wrappers come from the ``linen_method_wrapper`` hook. The composed chain is
cached per context (a ContextVar, so threads and asyncio tasks that activate a
wrapper do not affect each other) and tagged with a global generation that
changes when plugins change; with no active wrapper the cached value is
``None`` and the dispatcher calls the method directly.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any

from linen.core import errors, plugin_bus
from linen.module._state import _stack

__all__ = [
    'invalidate_method_wrappers',
    'get_runner',
    'active_wrappers',
    'call_at_boundary',
    'wrappers_are_relative',
    'MethodCallContext',
]

_generation = [0]
_chain: contextvars.ContextVar[tuple[int, Any] | None] = contextvars.ContextVar(
    'linen_method_wrapper_chain', default=None
)


def invalidate_method_wrappers(everywhere: bool = False) -> None:
    """Rebuild the wrapper chain on the next call (this context, or every context)."""
    if everywhere:
        _generation[0] += 1
    _chain.set(None)


plugin_bus.on_plugins_changed(lambda: invalidate_method_wrappers(everywhere=True))


class MethodCallContext:
    """The ``context`` argument of a wrapper (Flax's interceptor context fields too)."""

    __slots__ = ('module', 'method_name', 'method')

    def __init__(self, module: Any, method_name: str, method: Callable):
        self.module = module
        self.method_name = method_name
        self.method = method

    @property
    def orig_method(self) -> Callable:
        return self.method

    def __repr__(self) -> str:
        return f'MethodCallContext({type(self.module).__name__}.{self.method_name})'


class _Link:
    __slots__ = ('wrapper', 'next_fn', 'context')

    def __init__(self, wrapper, next_fn, context):
        self.wrapper = wrapper
        self.next_fn = next_fn
        self.context = context

    def __call__(self, *args, **kwargs):
        return self.wrapper(self.next_fn, args, kwargs, self.context)


def _compose(wrappers: tuple[Callable, ...]) -> Callable:
    # (the wrappers tuple is reachable as run.wrappers, see active_wrappers)
    if len(wrappers) == 1:
        # The usual chain (profiling labels alone): no links. A partial is called
        # from C, so the method runs with no extra Python frame.
        (only,) = wrappers

        def run(fun, module, method_name, args, kwargs):
            context = MethodCallContext(module, method_name, fun)
            return only(functools.partial(fun, module), args, kwargs, context)

    else:

        def run(fun, module, method_name, args, kwargs):
            context = MethodCallContext(module, method_name, fun)
            next_fn: Callable = functools.partial(fun, module)
            for wrapper in reversed(wrappers):
                next_fn = _Link(wrapper, next_fn, context)
            return next_fn(*args, **kwargs)

    run.wrappers = wrappers  # type: ignore[attr-defined]
    # Calls on unbound modules run only the wrappers that ask for them (Flax runs
    # its interceptors there, but no profiling names or captures).
    unbound = tuple(w for w in wrappers if getattr(w, 'wraps_unbound', False))
    run.unbound = (  # type: ignore[attr-defined]
        None if not unbound else (run if unbound == wrappers else _compose(unbound))
    )
    halves = tuple(h for h in (getattr(w, 'at_boundary', None) for w in wrappers) if h)
    run.relative = len(halves) == len(wrappers)  # type: ignore[attr-defined]
    run.boundary = _compose_boundary(halves) if halves else None  # type: ignore[attr-defined]
    return run


def _compose_boundary(halves: tuple[Callable, ...]) -> Callable:
    def run(fn, module, method_name, method, args, kwargs):
        context = MethodCallContext(module, method_name, method)
        next_fn: Callable = fn
        for half in reversed(halves):
            next_fn = _Link(half, next_fn, context)
        return next_fn(*args, **kwargs)

    return run


def _build() -> Callable | None:
    pm = plugin_bus.get_plugin_manager()
    hook = getattr(pm.hook, 'linen_method_wrapper', None)
    if hook is None or not hook.get_hookimpls():
        return None
    wrappers = tuple(w for w in plugin_bus.call_hook('linen_method_wrapper') if w is not None)
    return _compose(wrappers) if wrappers else None


def active_wrappers() -> tuple[Callable, ...]:
    """The wrappers active in this context (a cache key for tracing transforms)."""
    runner = get_runner()
    return () if runner is None else runner.wrappers  # type: ignore[attr-defined]


def wrappers_are_relative() -> bool:
    """Whether every active wrapper has an ``at_boundary`` half (see :func:`call_at_boundary`).

    True with no active wrapper. Then what the wrappers do inside a compiled
    transform does not depend on the instance's name or path, so the transform's
    cache need not key on them.
    """
    runner = get_runner()
    return runner is None or runner.relative  # type: ignore[attr-defined]


def call_at_boundary(
    module: Any, method_name: str, method: Callable, fn: Callable, args: tuple, kwargs: dict
) -> Any:
    """Run ``fn(*args, **kwargs)``, a compiled transform standing for one method call.

    The boundary halves of the active wrappers (a wrapper's ``at_boundary``
    attribute, same signature as the wrapper) run around it, with the context of
    ``module.method_name``. A half does outside the compiled function what
    depends on the instance (a profiling label: its name), and arranges that its
    wrapper, on the call of ``method`` that the transform makes inside, leaves
    that part out: so one compiled function serves every instance of a class.
    """
    runner = get_runner()
    boundary = None if runner is None else runner.boundary  # type: ignore[attr-defined]
    if boundary is None:
        return fn(*args, **kwargs)
    return boundary(fn, module, method_name, method, args, kwargs)


def get_runner() -> Callable | None:
    """The composed wrapper chain for this context, or None when nothing wraps."""
    entry = _chain.get()
    if entry is not None and entry[0] == _generation[0]:
        return entry[1]
    runner = _build()
    _chain.set((_generation[0], runner))
    return runner


# ------------------------------------------------------------- the dispatcher


def _wrap_method(fun: Callable) -> Callable:
    """The dispatcher entry for one method, made once per class attribute."""
    is_compact = bool(getattr(fun, 'compact', False))
    method_name = fun.__name__
    if getattr(fun, 'compact_name_scope', False):
        from linen.module._module import _wrap_compact_name_scope

        return _wrap_compact_name_scope(fun)

    @functools.wraps(fun)
    def wrapped(self, *args, **kwargs):
        return _call_wrapped_method(self, fun, method_name, is_compact, args, kwargs)

    wrapped.method_handler_wrapped = True  # type: ignore[attr-defined]
    wrapped.inner_fun = fun  # type: ignore[attr-defined]
    return wrapped


def _call_wrapped_method(self, fun, method_name, is_compact, args, kwargs):
    """Run ``fun(self, *args, **kwargs)`` through the dispatcher.

    The Module bookkeeping a wrapped method call gets (lazy ``setup``, the compact
    state, the module stack) and the active method wrappers (``linen_method_wrapper``
    hook) apply, exactly as for ``self.method(*args, **kwargs)``. Public as
    :func:`linen.module.dispatch.call_wrapped_method`.

    Args:
      self: the module the method runs on.
      fun: the plain function of the method.
      method_name: the name wrappers see (``MethodCallContext.method_name``).
      is_compact: whether ``fun`` is a ``@compact`` method (its submodules are
        named inline and claimed afresh on each call).
      args: the positional arguments, as a tuple.
      kwargs: the keyword arguments, as a dict.

    Returns:
      What ``fun`` returns (through the wrappers).
    """
    scope = self.scope
    if scope is None:
        if is_compact:
            raise errors.CallCompactUnboundModuleError(type(self).__name__, method_name)
        runner = get_runner()
        if runner is not None and runner.unbound is not None:
            return runner.unbound(fun, self, method_name, args, kwargs)
        return fun(self, *args, **kwargs)
    state = self._state
    if not state.setup_called:
        self._try_setup()
    if is_compact:
        recurrent = state.in_compact_method
        state.in_compact_method = True
    stack = _stack.modules
    stack.append(self)
    try:
        entry = _chain.get()
        runner = entry[1] if entry is not None and entry[0] == _generation[0] else get_runner()
        if runner is None:
            return fun(self, *args, **kwargs)
        return runner(fun, self, method_name, args, kwargs)
    finally:
        stack.pop()
        if is_compact:
            # A compact method may be called again (module reuse): its names are
            # claimed afresh each call, rng counters carry on.
            self.scope.reservations.clear()
            if not recurrent:
                state.in_compact_method = False
                state.autoname_cursor = {}
