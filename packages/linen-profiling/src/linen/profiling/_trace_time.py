"""``trace_times``: where tracing spends Python time, per module (self and inclusive).

A function is traced once (``jax.make_jaxpr``: nothing compiles or runs) while
the recording wrapper times every wrapped Module method call. A call's
inclusive time is its wall time; its self time leaves out the wrapped calls
nested in it. Time outside every module (JAX's own tracing of the function,
``apply``'s bookkeeping) is the row with path ``''``, so the self times add up
to the measured trace time.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from linen.profiling._report import format_table
from linen.profiling._tree import PathRows, indented_name, tree_rows

__all__ = ['TraceTimeRow', 'TraceTimes', 'trace_times']


@dataclass(frozen=True)
class TraceTimeRow:
    """Tracing time of one label path: own (``seconds``), with submodules, and call count."""

    path: str
    seconds: float
    inclusive_seconds: float
    calls: int


@dataclass(frozen=True)
class TraceTimes(PathRows):
    """What :func:`trace_times` returns; ``total_seconds`` is the measured trace time."""

    rows: tuple[TraceTimeRow, ...]
    total_seconds: float

    def __str__(self) -> str:
        total = self.total_seconds or 1.0
        body = []
        for row in self.rows:
            name = indented_name(row.path)
            body.append(
                [
                    name,
                    f'{1e3 * row.inclusive_seconds:.3f}',
                    f'{1e3 * row.seconds:.3f}',
                    f'{100.0 * row.inclusive_seconds / total:.1f}%',
                    str(row.calls),
                ]
            )
        body.append(['total', f'{1e3 * self.total_seconds:.3f}', '', '100.0%', ''])
        return format_table(
            'Trace time per module (Python time while tracing)',
            ['module', 'ms', 'own ms', '% time', 'calls'],
            body,
        )


def trace_times(fn: Callable, *args: Any, **kwargs: Any) -> TraceTimes:
    """Trace ``fn(*args, **kwargs)`` once and report the Python time per module label path.

    Paths are label paths, as in :func:`module_costs` (``'MLP/Dense_0'``). A
    module whose trace a lifted ``nn.jit`` reuses from its cache is not traced
    again and has no time.

    >>> import jax, jax.numpy as jnp
    >>> import linen.nn as nn
    >>> model, x = nn.Dense(3), jnp.ones((2, 4))
    >>> variables = model.init(jax.random.key(0), x)
    >>> times = trace_times(model.apply, variables, x)
    >>> times['Dense'].calls
    1
    """
    import jax

    from linen.profiling._recording import recording

    # A fresh callable every time: make_jaxpr traces through jit, whose cache is keyed
    # on the function object, so a function traced before (by this call, or by a
    # jax.jit of it) would come back from the cache without running any Module method.
    traced = functools.partial(fn, **kwargs)
    with recording(capture_shapes=False) as records:
        started = time.perf_counter()
        jax.make_jaxpr(traced)(*args)
        total = time.perf_counter() - started
    own: dict[str, list[float]] = {}
    calls: dict[str, int] = {}
    for call in records:
        values = own.setdefault(call.label_path, [0.0])
        values[0] += max(call.seconds - call.children_seconds, 0.0)
        calls[call.label_path] = calls.get(call.label_path, 0) + 1
    outside = max(total - sum(values[0] for values in own.values()), 0.0)
    own.setdefault('', [0.0])[0] += outside
    rows = tuple(
        TraceTimeRow(
            path=path, seconds=mine[0], inclusive_seconds=total[0], calls=calls.get(path, 0)
        )
        for path, mine, total in tree_rows(own, 1)
    )
    return TraceTimes(rows=rows, total_seconds=total)
