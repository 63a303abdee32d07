"""``named_call``: label one method explicitly, even with labels globally off."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from linen.module.dispatch import in_setup
from linen.profiling._labels import LABELLED_ATTRIBUTE, end_skip, label_scope, skips_at_boundary
from linen.profiling._naming import derive_profiling_name
from linen.profiling._state import is_named_call_enabled

__all__ = ['named_call']

F = TypeVar('F', bound=Callable[..., Any])


def named_call(class_fn: F, force: bool = True) -> F:
    """Label a Module method in profiles (a ``jax.named_scope`` that reports recognise).

    It pushes a name on JAX's name stack; it is not a transformation boundary and
    adds no HLO instructions. During ``setup`` the method runs unlabelled. The
    automatic labelling of the dispatcher skips a method decorated here, so the
    label appears once.

    Args:
      class_fn: the method to label.
      force: label even when labels are off in this context (``False``: follow
        :func:`enable_named_call`/:func:`disable_named_call`).

    Returns:
      The labelled method.
    """

    @functools.wraps(class_fn)
    def labelled(self, *args, **kwargs):
        if (not force and not is_named_call_enabled()) or in_setup(self):
            return class_fn(self, *args, **kwargs)
        name = derive_profiling_name(self, class_fn.__name__, class_fn)
        skip = skips_at_boundary(name)
        if skip is not None:
            # Inside nn.jit: the boundary pushed this label outside the compiled function.
            try:
                return class_fn(self, *args, **kwargs)
            finally:
                end_skip(skip)
        with label_scope(name):
            return class_fn(self, *args, **kwargs)

    setattr(labelled, LABELLED_ATTRIBUTE, True)
    return labelled  # type: ignore[return-value]
