"""The labels linen pushes on JAX's name stack, and the record of which it pushed.

Every label goes through :func:`label_scope`: it opens ``jax.named_scope(name)``
and remembers the label path (the labels enclosing it, outermost first) in a
process-wide set. Reports attribute an op to a module by matching the
components of its ``op_name`` against these paths, so the components JAX adds
(``jit(f)``, ``while``, ``body``, ``eval_jaxpr``, ``transpose(jvp(...))``, and
whatever a future JAX adds) are skipped without naming them.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import jax

from linen.profiling._naming import cached_profiling_name, derive_profiling_name

__all__ = [
    'LABELLED_ATTRIBUTE',
    'emitted_label_paths',
    'label_method_call',
    'label_method_call_hooked',
    'label_scope',
]

LABELLED_ATTRIBUTE = '__linen_named_call__'
"""Set on methods decorated with :func:`named_call`; they label themselves."""

_stack: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    'linen_profiling_labels', default=()
)
# Label paths pushed so far (only grows: a path once emitted may be in any
# compiled program that is still analysed). Adding to a set is atomic under the
# GIL, so threads need no lock.
_emitted: set[tuple[str, ...]] = set()


def emitted_label_paths() -> frozenset[tuple[str, ...]]:
    """Every label path linen has pushed in this process (``('MLP', 'Dense_0')``, ...)."""
    return frozenset(_emitted)


@contextlib.contextmanager
def label_scope(name: str) -> Iterator[None]:
    """Run the block under the profiling label ``name`` (``jax.named_scope``), recorded.

    Use it for a region of plain JAX code that reports should show as a row.

    >>> import jax, jax.numpy as jnp
    >>> from linen.profiling import module_costs
    >>> def f(x, w):
    ...     with label_scope('Dense_0'):
    ...         return x @ w
    >>> module_costs(f, jnp.ones((4, 8)), jnp.ones((8, 2)))['Dense_0'].flops
    128.0
    """
    labels = (*_stack.get(), name)
    _emitted.add(labels)
    token = _stack.set(labels)
    try:
        with jax.named_scope(name):
            yield
    finally:
        _stack.reset(token)


def _labelled(name: str, next_fn, args: tuple, kwargs: dict[str, Any]) -> Any:
    labels = (*_stack.get(), name)
    _emitted.add(labels)
    token = _stack.set(labels)
    try:
        with jax.named_scope(name):
            return next_fn(*args, **kwargs)
    finally:
        _stack.reset(token)


def label_method_call(next_fn, args: tuple, kwargs: dict[str, Any], context) -> Any:
    """A ``linen_method_wrapper``: ``next_fn`` under the call's label (default rule, cached)."""
    if getattr(context.method, LABELLED_ATTRIBUTE, False):
        # @named_call opens its own scope; a second one would double the label.
        return next_fn(*args, **kwargs)
    name = cached_profiling_name(context.module, context.method_name, context.method)
    return _labelled(name, next_fn, args, kwargs)


def label_method_call_hooked(next_fn, args: tuple, kwargs: dict[str, Any], context) -> Any:
    """Like :func:`label_method_call`, asking the name hook for every call (user rules)."""
    if getattr(context.method, LABELLED_ATTRIBUTE, False):
        return next_fn(*args, **kwargs)
    name = derive_profiling_name(context.module, context.method_name, context.method)
    return _labelled(name, next_fn, args, kwargs)
