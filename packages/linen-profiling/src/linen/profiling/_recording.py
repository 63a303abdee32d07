"""Recording Module method calls for ``tabulate``: context-local, no process-wide state.

While :func:`recording` is active in a context (a ``ContextVar``: each thread and
asyncio task has its own), the profiling plugin's method wrapper records every
wrapped call: module path, class, method, input and output shapes, and the label
path it runs under. Nothing is registered or unregistered per call, so two
``tabulate`` calls in two threads do not see each other's records.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from linen.profiling._naming import derive_profiling_name

__all__ = ['Call', 'is_recording', 'record', 'recording', 'record_then']

_records: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    'linen_tabulate_records', default=None
)
_label_stack: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    'linen_tabulate_labels', default=()
)
_parent: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    'linen_tabulate_parent', default=None
)
_capture_shapes: contextvars.ContextVar[bool] = contextvars.ContextVar(
    'linen_tabulate_shapes', default=True
)
# label path -> calls so far, while each call is to open an occurrence scope ``#k``
_occurrences: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    'linen_tabulate_occurrences', default=None
)
OCCURRENCE_PREFIX = '#'


@dataclass
class Call:
    """One recorded method call."""

    path: tuple[str, ...]
    module_type: str
    method_name: str
    label_path: str
    inputs: tuple[Any, dict[str, Any]]  # (positional, keyword) arguments as shape text
    outputs: Any = None
    seconds: float = 0.0  # wall time of the call, submodule calls included
    children_seconds: float = 0.0  # of that, in directly nested wrapped calls


def is_recording() -> bool:
    return _records.get() is not None


def _invalidate() -> None:
    from linen.module import invalidate_method_wrappers

    invalidate_method_wrappers()


@contextlib.contextmanager
def recording(capture_shapes: bool = True, occurrences: bool = False) -> Iterator[list[Call]]:
    """Record the wrapped method calls made in this context inside the block.

    ``capture_shapes=False`` records no input and output shapes (less work
    inside the timed calls, for trace times). ``occurrences=True`` runs the
    k-th call under a label path inside ``jax.named_scope('#k')``, so a traced
    program tells the calls of one module apart.
    """
    records: list[Call] = []
    token = _records.set(records)
    shapes_token = _capture_shapes.set(capture_shapes)
    occurrences_token = _occurrences.set({} if occurrences else None)
    _invalidate()
    try:
        yield records
    finally:
        _occurrences.reset(occurrences_token)
        _capture_shapes.reset(shapes_token)
        _records.reset(token)
        _invalidate()


def shapes(tree: Any) -> Any:
    """``tree`` with every array replaced by ``'float32[2,3]'``-style text."""
    import jax

    def leaf(x):
        if hasattr(x, 'shape') and hasattr(x, 'dtype'):
            return f'{x.dtype}[{",".join(str(d) for d in x.shape)}]'
        return x

    return jax.tree_util.tree_map(leaf, tree)


def record(next_fn, args, kwargs, context):
    """A ``linen_method_wrapper`` that records the call while :func:`recording` is active."""
    records = _records.get()
    if records is None:
        return next_fn(*args, **kwargs)
    started = time.perf_counter()
    module = context.module
    capture = _capture_shapes.get()
    label = derive_profiling_name(module, context.method_name, context.method)
    labels = (*_label_stack.get(), label)
    call = Call(
        path=tuple(getattr(module, 'path', None) or ()),
        module_type=type(module).__name__,
        method_name=context.method_name,
        label_path='/'.join(labels),
        inputs=(shapes(args), shapes(dict(kwargs))) if capture else ((), {}),
    )
    records.append(call)
    parent = _parent.get()
    token = _label_stack.set(labels)
    parent_token = _parent.set(call)
    counts = _occurrences.get()
    try:
        if counts is None:
            result = next_fn(*args, **kwargs)
        else:
            import jax

            counts[call.label_path] = k = counts.get(call.label_path, 0) + 1
            with jax.named_scope(f'{OCCURRENCE_PREFIX}{k}'):
                result = next_fn(*args, **kwargs)
    finally:
        _parent.reset(parent_token)
        _label_stack.reset(token)
        call.seconds = time.perf_counter() - started
        if parent is not None:
            parent.children_seconds += call.seconds
    if capture:
        call.outputs = shapes(result)
    return result


_combined: dict[Any, Any] = {}


def record_then(wrapper):
    """One wrapper that records, then runs ``wrapper`` (the same object for the same wrapper).

    The identity matters: lifted ``nn.jit`` keys its trace cache on the active
    wrappers.
    """
    combined = _combined.get(wrapper)
    if combined is None:

        def combined(next_fn, args, kwargs, context):
            def inner(*a, **k):
                return wrapper(next_fn, a, k, context)

            return record(inner, args, kwargs, context)

        _combined[wrapper] = combined
    return combined
