"""The method dispatcher and its wrapper chain.

Every wrapped Module method enters :func:`_call_wrapped_method`, which does the
Module bookkeeping (lazy setup, compact state, the module stack) and runs the
call through the chain of method wrappers.

Wrappers come from the ``linen_method_wrapper`` hook, as
:class:`~linen.module.hookspecs.MethodWrapper` values. The composed chain (a
:class:`_Chain`) is cached per context (a ContextVar, so threads and asyncio
tasks that activate a wrapper do not affect each other) and tagged with the
plugin generation, which changes when plugins change; with no active wrapper
the cached value is ``None`` and the dispatcher calls the method directly.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any

from linen.core import errors, plugin_bus
from linen.module._state import _stack
from linen.module.hookspecs import MethodWrapper

__all__ = [
    'invalidate_method_wrappers',
    'get_runner',
    'run_setup',
    'active_wrappers',
    'call_at_boundary',
    'wrappers_are_relative',
    'MethodCallContext',
]


class _PluginGeneration:
    """Counts plugin changes, process-wide.

    Unlike the switches that activate a wrapper (ContextVars of their plugins),
    the set of registered plugins is one for the whole process: every context's
    cached chain is stale when it changes.
    """

    __slots__ = ('value',)

    def __init__(self) -> None:
        self.value = 0


_plugins = _PluginGeneration()
_chain: contextvars.ContextVar[tuple[int, _Chain | None] | None] = contextvars.ContextVar(
    'linen_method_wrapper_chain', default=None
)


def invalidate_method_wrappers(everywhere: bool = False) -> None:
    """Rebuild the wrapper chain on the next call (this context, or every context)."""
    if everywhere:
        _plugins.value += 1
    _chain.set(None)


plugin_bus.on_plugins_changed(lambda: invalidate_method_wrappers(everywhere=True))


class MethodCallContext:
    """The ``context`` argument of a wrapper: the module, the method's name and function.

    ``method`` is the plain function (call it with the module first);
    :class:`~linen.module._intercept.InterceptorContext`, what a Flax-style
    interceptor sees, has ``orig_method`` bound to the module instead.
    """

    __slots__ = ('module', 'method_name', 'method')

    def __init__(self, module: Any, method_name: str, method: Callable):
        self.module = module
        self.method_name = method_name
        self.method = method

    def __repr__(self) -> str:
        return f'MethodCallContext({type(self.module).__name__}.{self.method_name})'


class _Link:
    __slots__ = ('wrap', 'next_fn', 'context')

    def __init__(self, wrap, next_fn, context):
        self.wrap = wrap
        self.next_fn = next_fn
        self.context = context

    def __call__(self, *args, **kwargs):
        return self.wrap(self.next_fn, args, kwargs, self.context)


class _Chain:
    """The active wrappers, composed once per (context, plugin generation).

    Attributes:
      run: ``run(fun, module, method_name, args, kwargs)``, the call through every wrapper.
      wrappers: the :class:`MethodWrapper` values, outermost first.
      unbound: the chain for calls on unbound modules (only the wrappers that ask
        for them), or None.
      relative: whether every wrapper has an ``at_boundary`` half.
      boundary: ``boundary(fn, module, method_name, method, args, kwargs)`` running
        the ``at_boundary`` halves around a compiled call, or None.
      setup: the chain for a module's lazy ``setup`` call (only the wrappers that
        ask for it), or None.
      before_setup: ``before_setup(module, fun, method_name, is_compact, args,
        kwargs)``, the call of a module whose ``setup`` has not run yet through the
        leading wrappers flagged ``before_setup``, then setup and the rest; or None.
    """

    __slots__ = ('run', 'wrappers', 'unbound', 'relative', 'boundary', 'setup', 'before_setup')

    def __init__(self, wrappers: tuple[MethodWrapper, ...]):
        self.wrappers = wrappers
        self.run = _compose(tuple(w.wrap for w in wrappers))
        # Calls on unbound modules run only the wrappers that ask for them (Flax
        # runs its interceptors there, but no profiling names or captures).
        unbound = tuple(w for w in wrappers if w.wraps_unbound)
        self.unbound = None if not unbound else (self if unbound == wrappers else _Chain(unbound))
        setup = tuple(w for w in wrappers if w.wraps_setup)
        self.setup = None if not setup else (self if setup == wrappers else _Chain(setup))
        halves = tuple(w.at_boundary for w in wrappers if w.at_boundary is not None)
        self.relative = len(halves) == len(wrappers)
        self.boundary = _compose_boundary(halves) if halves else None
        early = 0
        while early < len(wrappers) and wrappers[early].before_setup:
            early += 1
        self.before_setup = (
            None
            if not early
            else _compose_before_setup(
                tuple(w.wrap for w in wrappers[:early]),
                _Chain(wrappers[early:]) if early < len(wrappers) else None,
            )
        )


def _compose(wraps: tuple[Callable, ...]) -> Callable:
    if len(wraps) == 1:
        # The usual chain (profiling labels alone): no links. A partial is called
        # from C, so the method runs with no extra Python frame.
        (only,) = wraps

        def run(fun, module, method_name, args, kwargs):
            context = MethodCallContext(module, method_name, fun)
            return only(functools.partial(fun, module), args, kwargs, context)

        return run

    def run_all(fun, module, method_name, args, kwargs):
        context = MethodCallContext(module, method_name, fun)
        next_fn: Callable = functools.partial(fun, module)
        for wrap in reversed(wraps):
            next_fn = _Link(wrap, next_fn, context)
        return next_fn(*args, **kwargs)

    return run_all


def _compose_boundary(halves: tuple[Callable, ...]) -> Callable:
    def run(fn, module, method_name, method, args, kwargs):
        context = MethodCallContext(module, method_name, method)
        next_fn: Callable = fn
        for half in reversed(halves):
            next_fn = _Link(half, next_fn, context)
        return next_fn(*args, **kwargs)

    return run


def _compose_before_setup(wraps: tuple[Callable, ...], rest: _Chain | None) -> Callable:
    around = _compose_boundary(wraps)  # the same links: `wraps` around a function

    def run(module, fun, method_name, is_compact, args, kwargs):
        def after(*a, **k):
            return _call_wrapped_method(module, fun, method_name, is_compact, a, k, rest)

        return around(after, module, method_name, fun, args, kwargs)

    return run


def _as_method_wrapper(result: Any) -> MethodWrapper:
    # A plain callable is a wrapper with no options (see the hook's spec).
    return result if isinstance(result, MethodWrapper) else MethodWrapper(result)


def _build() -> _Chain | None:
    pm = plugin_bus.get_plugin_manager()
    hook = getattr(pm.hook, 'linen_method_wrapper', None)
    if hook is None or not hook.get_hookimpls():
        return None
    results = plugin_bus.call_hook('linen_method_wrapper')
    wrappers = tuple(_as_method_wrapper(w) for w in results if w is not None)
    return _Chain(wrappers) if wrappers else None


def active_wrappers() -> tuple[MethodWrapper, ...]:
    """The wrappers active in this context (a cache key for tracing transforms)."""
    chain = get_runner()
    return () if chain is None else chain.wrappers


def wrappers_are_relative() -> bool:
    """Whether every active wrapper has an ``at_boundary`` half (see :func:`call_at_boundary`).

    True with no active wrapper. Then what the wrappers do inside a compiled
    transform does not depend on the instance's name or path, so the transform's
    cache need not key on them.
    """
    chain = get_runner()
    return chain is None or chain.relative


def call_at_boundary(
    module: Any, method_name: str, method: Callable, fn: Callable, args: tuple, kwargs: dict
) -> Any:
    """Run ``fn(*args, **kwargs)``, a compiled transform standing for one method call.

    The ``at_boundary`` halves of the active wrappers run around it, with the
    context of ``module.method_name``. A half does outside the compiled function
    what depends on the instance (a profiling label: its name), and arranges that
    its wrapper, on the call of ``method`` that the transform makes inside, leaves
    that part out: so one compiled function serves every instance of a class.
    """
    chain = get_runner()
    boundary = None if chain is None else chain.boundary
    if boundary is None:
        return fn(*args, **kwargs)
    return boundary(fn, module, method_name, method, args, kwargs)


def run_setup(module: Any, setup: Callable) -> None:
    """Run ``setup(module)``, the module's lazy setup, through the wrappers that ask for it."""
    chain = get_runner()
    if chain is None or chain.setup is None:
        setup(module)
    else:
        chain.setup.run(setup, module, 'setup', (), {})


def get_runner() -> _Chain | None:
    """The composed wrapper chain for this context, or None when nothing wraps."""
    entry = _chain.get()
    if entry is not None and entry[0] == _plugins.value:
        return entry[1]
    chain = _build()
    _chain.set((_plugins.value, chain))
    return chain


# ------------------------------------------------------------- the dispatcher


def _wrap_method(fun: Callable) -> Callable:
    """The dispatcher entry for one method, made once per class attribute."""
    is_compact = bool(getattr(fun, 'compact', False))
    method_name = fun.__name__

    @functools.wraps(fun)
    def wrapped(self, *args, **kwargs):
        return _call_wrapped_method(self, fun, method_name, is_compact, args, kwargs)

    wrapped.method_handler_wrapped = True  # type: ignore[attr-defined]
    wrapped.inner_fun = fun  # type: ignore[attr-defined]
    return wrapped


# The ``chain`` default of _call_wrapped_method: look up this context's chain.
_LOOKUP: Any = object()


def _call_wrapped_method(self, fun, method_name, is_compact, args, kwargs, chain=_LOOKUP):
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
      chain: internal: the rest of the chain after the wrappers that ran before
        ``setup`` (:attr:`MethodWrapper.before_setup`).

    Returns:
      What ``fun`` returns (through the wrappers).
    """
    scope = self.scope
    if scope is None:
        if is_compact:
            raise errors.CallCompactUnboundModuleError(type(self).__name__, method_name)
        chain = get_runner()
        if chain is not None and chain.unbound is not None:
            return chain.unbound.run(fun, self, method_name, args, kwargs)
        return fun(self, *args, **kwargs)
    state = self._state
    if chain is _LOOKUP:
        entry = _chain.get()
        chain = entry[1] if entry is not None and entry[0] == _plugins.value else get_runner()
        if not state.setup_called:
            if chain is not None and chain.before_setup is not None:
                return chain.before_setup(self, fun, method_name, is_compact, args, kwargs)
            self._try_setup()
    elif not state.setup_called:
        self._try_setup()
    if is_compact:
        recurrent = state.in_compact_method
        state.in_compact_method = True
    stack = _stack.modules
    stack.append(self)
    try:
        if chain is None:
            return fun(self, *args, **kwargs)
        return chain.run(fun, self, method_name, args, kwargs)
    finally:
        stack.pop()
        if is_compact:
            # A compact method may be called again (module reuse): its names are
            # claimed afresh each call, rng counters carry on.
            self.scope.reservations.clear()
            if not recurrent:
                state.in_compact_method = False
                state.autoname_cursor = {}
