"""The method wrapper that runs a Module method under its profiling label."""

from __future__ import annotations

from typing import Any

import jax

from linen.profiling._naming import derive_profiling_name

__all__ = ['label_method_call', 'LABELLED_ATTRIBUTE']

LABELLED_ATTRIBUTE = '__linen_named_call__'
"""Set on methods decorated with :func:`named_call`; they label themselves."""


def label_method_call(next_fn, args: tuple, kwargs: dict[str, Any], context) -> Any:
    """A ``linen_method_wrapper``: ``next_fn`` under ``jax.named_scope(label)``."""
    if getattr(context.method, LABELLED_ATTRIBUTE, False):
        # @named_call opens its own scope; a second one would double the label.
        return next_fn(*args, **kwargs)
    name = derive_profiling_name(context.module, context.method_name, context.method)
    with jax.named_scope(name):
        return next_fn(*args, **kwargs)
