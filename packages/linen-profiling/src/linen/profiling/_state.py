"""Whether Module methods run under profiling labels: context-local state.

Flax keeps this in a module global read from ``flax_profile`` once at import, so
``config.update('flax_profile', ...)`` does nothing and ``override_named_call``
in one thread changes every thread. Here the switch is a ``ContextVar``: each
thread and each asyncio task sees its own, and a context that never switched
follows ``linen.core.config.linen_profile`` (env ``LINEN_PROFILE``, default on),
which ``config.update`` changes for everyone at once.

The dispatcher of linen-module caches its chain of method wrappers; every change
here tells it to rebuild (only the current context's chain for a context-local
switch, every chain for a config change), so that with labels off no profiling
code runs on a call.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from linen.core.config import config

__all__ = [
    'disable_named_call',
    'enable_named_call',
    'is_named_call_enabled',
    'override_named_call',
]

# None: follow the config flag. True/False: this context switched explicitly.
_switch: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    'linen_named_call', default=None
)


def _invalidate(everywhere: bool = False) -> None:
    try:
        from linen.module import invalidate_method_wrappers
    except ImportError:  # linen-module not installed (or not yet providing it)
        return
    invalidate_method_wrappers(everywhere=everywhere)


def is_named_call_enabled() -> bool:
    """Whether wrapped Module methods run under ``jax.named_scope`` in this context."""
    value = _switch.get()
    return bool(config.linen_profile) if value is None else value


def _set(value: bool | None) -> None:
    before = is_named_call_enabled()
    _switch.set(value)
    if is_named_call_enabled() != before:
        _invalidate()


def enable_named_call() -> None:
    """Label Module methods in profiles (``jax.named_scope``), in the current context.

    Labels show only in compiled (``jax.jit``) computations. Threads and asyncio
    tasks started afterwards follow the config flag, not this call; use
    ``config.update('linen_profile', True)`` for a process-wide switch.
    """
    _set(True)


def disable_named_call() -> None:
    """Stop labelling Module methods, in the current context (see :func:`enable_named_call`)."""
    _set(False)


@contextlib.contextmanager
def override_named_call(enable: bool = True) -> Iterator[None]:
    """Switch labels on (or off) inside a ``with`` block; the previous state returns after it.

    The previous state returns even when the block raises, and blocks nest.

    >>> with override_named_call(False):
    ...     is_named_call_enabled()
    False
    """
    before = is_named_call_enabled()
    token = _switch.set(bool(enable))
    if bool(enable) != before:
        _invalidate()
    try:
        yield
    finally:
        inside = is_named_call_enabled()
        _switch.reset(token)
        if is_named_call_enabled() != inside:
            _invalidate()


def _on_config_change(name: str, value: object) -> None:
    if name == 'linen_profile':
        _invalidate(everywhere=True)


config.on_change(_on_config_change)
