"""Timing helpers: interleaved repetitions and medians.

The machine is noisy, so every measure runs its peers round-robin (the order
rotates each repetition) and reports medians; a burst of noise then hits every
column alike instead of one.

Every sample starts from a collected heap. All peers share one process, so a full
(generation 2) collection walks every library's objects, and it runs when enough
allocations have piled up across earlier samples, whichever peer is running then:
it made a trace of a train step read ~250 or ~450 ms by turns, for every column
alike. The collector stays on while a sample runs, so a library's own collections
count against it.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence


def interleaved(
    names: Sequence[str], sample: Callable[[str], float], reps: int
) -> dict[str, list[float]]:
    """Call ``sample(name)`` ``reps`` times per name, round-robin with a rotating start."""
    samples: dict[str, list[float]] = {n: [] for n in names}
    names = list(names)
    for rep in range(reps):
        shift = rep % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            samples[name].append(sample(name))
    return samples


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes, from a collected heap."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def per_call(fn: Callable[[], object], calls: int) -> float:
    """Mean seconds per call over ``calls`` back-to-back calls, from a collected heap."""
    gc.collect()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls
