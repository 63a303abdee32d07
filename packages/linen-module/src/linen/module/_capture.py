"""``capture_intermediates``: a method-wrapper plugin that sows method outputs.

While ``apply(..., capture_intermediates=...)`` runs, every wrapped call whose
``(module, method_name)`` the filter accepts stores its output in collection
``intermediates`` under the method's name, as Flax does.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable

from linen.core.hookspecs import hookimpl
from linen.module._dispatch import invalidate_method_wrappers
from linen.module.hookspecs import MethodWrapper

_filter: contextvars.ContextVar[Callable | None] = contextvars.ContextVar(
    'linen_capture_intermediates', default=None
)


def _default_filter(module, method_name: str) -> bool:
    return method_name == '__call__'


@contextlib.contextmanager
def capturing(filter_fn: bool | Callable):
    """Capture outputs of the calls ``filter_fn(module, method_name)`` accepts."""
    token = _filter.set(_default_filter if filter_fn is True else filter_fn)
    invalidate_method_wrappers()
    try:
        yield
    finally:
        _filter.reset(token)
        invalidate_method_wrappers()


def _capture(next_fn, args, kwargs, context):
    y = next_fn(*args, **kwargs)
    accept = _filter.get()
    if accept is not None and accept(context.module, context.method_name):
        context.module.sow('intermediates', context.method_name, y)
    return y


_CAPTURE = MethodWrapper(_capture)


@hookimpl
def linen_method_wrapper() -> MethodWrapper | None:
    return _CAPTURE if _filter.get() is not None else None
