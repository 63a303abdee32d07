"""``intercept_methods``: a method-wrapper plugin running user interceptors.

An interceptor is ``interceptor(next_fun, args, kwargs, context)`` with
``context.module``, ``context.method_name`` and ``context.orig_method``, as in
Flax. Nested ``intercept_methods`` blocks compose; the outermost runs first.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from linen.core.hookspecs import hookimpl
from linen.module._dispatch import invalidate_method_wrappers
from linen.module.hookspecs import MethodWrapper

_interceptors: contextvars.ContextVar[tuple[Callable, ...]] = contextvars.ContextVar(
    'linen_interceptors', default=()
)


@dataclasses.dataclass(frozen=True)
class InterceptorContext:
    """What an interceptor learns about the call it intercepts (Flax's dataclass).

    Attributes:
      module: the Module whose method is called.
      method_name: the method's name.
      orig_method: the method bound to ``module``; ``orig_method(*args, **kwargs)``
        runs it without the interceptors.
    """

    module: Any
    method_name: str
    orig_method: Callable


@contextlib.contextmanager
def intercept_methods(interceptor: Callable):
    """Run every wrapped Module method call in this context through ``interceptor``.

    >>> import linen.nn as nn
    >>> class Double(nn.Module):
    ...     def __call__(self, x):
    ...         return 2 * x
    >>> def log(next_fun, args, kwargs, context):
    ...     print(type(context.module).__name__, context.method_name)
    ...     return next_fun(*args, **kwargs)
    >>> with intercept_methods(log):
    ...     y = Double().apply({}, 1.5)
    Double __call__
    >>> y
    3.0
    """
    token = _interceptors.set(_interceptors.get() + (interceptor,))
    invalidate_method_wrappers()
    try:
        yield
    finally:
        _interceptors.reset(token)
        invalidate_method_wrappers()


def _run_interceptors(next_fn, args, kwargs, context):
    context = InterceptorContext(
        context.module, context.method_name, functools.partial(context.method, context.module)
    )
    for interceptor in reversed(_interceptors.get()):
        next_fn = _bind(interceptor, next_fn, context)
    return next_fn(*args, **kwargs)


def _bind(interceptor, next_fn, context):
    def call(*args, **kwargs):
        return interceptor(next_fn, args, kwargs, context)

    return call


# Flax runs interceptors for calls on unbound modules and for setup too.
_INTERCEPT = MethodWrapper(_run_interceptors, wraps_unbound=True, wraps_setup=True)


@hookimpl
def linen_method_wrapper() -> MethodWrapper | None:
    return _INTERCEPT if _interceptors.get() else None
