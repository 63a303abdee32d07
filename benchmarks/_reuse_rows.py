"""The trace-reuse rows: models built from repeated blocks, linen with reuse off and on.

Pure JAX, Flax, Haiku and Equinox trace (and lower) every copy of a block; linen
with trace reuse on (``linen.transforms.linen_reuse_traces``) traces a block once per
trace and reuses its program for the other copies. Each row samples the peers and
linen with reuse on (:data:`REUSE`) round-robin, as every other row; the linen cell
reads ``off <cell>; on <cell>``. Ratios are to pure JAX, fresh functions each time,
so JAX's own tracing caches never answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import jax

from benchmarks import _measures as m
from benchmarks._bench import Bench
from benchmarks._hlo import summarize
from benchmarks._rows import Row, human_seconds
from benchmarks._timing import timed

# The extra sampled name for linen with trace reuse on.
REUSE = 'linen_reuse'


def _reusing(peer: str):
    if peer != REUSE:
        return contextlib.nullcontext()
    from linen.transforms import linen_reuse_traces

    return linen_reuse_traces()


def _impl(bench: Bench, peer: str, model: str) -> tuple[Any, Any]:
    name = 'linen' if peer == REUSE else peer
    return bench.impls[name][model], bench.params[name][model]


def _row(
    bench: Bench,
    key: str,
    label: str,
    target: str,
    model: str,
    work: Callable[[str], Callable[[], Any]],
    reps: int,
    warmup: bool = True,
) -> Row:
    """``work(peer)`` returns the thunk to time for ``peer`` (run with reuse on for REUSE)."""
    row = Row(key, label, target, 's')

    def sample(peer: str) -> float:
        thunk = work(peer)
        with _reusing(peer):
            return timed(thunk)

    extra = (REUSE,) if 'linen' in bench.available(model) else ()
    m._ratio_row(bench, row, model, sample, reps, warmup=warmup, extra=extra)
    ratio, median = row.ratios.get(REUSE), row.medians.get(REUSE)
    if 'linen' in row.medians and row.medians['linen'] is not None and median is not None:
        lo, hi = row.extra['spread'][REUSE]
        band = f'; ×{lo:.2f}–{hi:.2f}' if len(row.samples[REUSE]) > 1 else ''
        on = f'×{ratio:.2f} ({human_seconds(median)}{band})'
        row.cells['linen'] = f'off {row.cells["linen"]}; on {on}'
    elif extra:
        row.cells['linen'] = f'{row.cells.get("linen", "")}; reuse on: {bench.reason(REUSE, model)}'
    return row


def measure_trace(bench: Bench, model: str, label: str, target: str, reps: int) -> Row:
    def work(peer):
        impl, p = _impl(bench, peer, model)
        return lambda: jax.make_jaxpr(lambda q, y: impl.apply(q, y))(p, bench.inputs[model])

    return _row(bench, f'reuse_trace_{model}', label, target, model, work, reps)


def measure_trace_lower(bench: Bench, model: str, label: str, target: str, reps: int) -> Row:
    def work(peer):
        impl, p = _impl(bench, peer, model)
        return lambda: jax.jit(lambda q, y: impl.apply(q, y)).lower(p, bench.inputs[model])

    return _row(bench, f'reuse_trace_lower_{model}', label, target, model, work, reps)


def measure_lower_compile(bench: Bench, model: str, label: str, target: str, reps: int) -> Row:
    def work(peer):
        impl, p = _impl(bench, peer, model)
        fresh = jax.jit(lambda q, y: impl.apply(q, y))
        return lambda: fresh.lower(p, bench.inputs[model]).compile()

    # No warm-up round: compiling is slow and JAX caches nothing across fresh functions.
    return _row(
        bench, f'reuse_lower_compile_{model}', label, target, model, work, reps, warmup=False
    )


def _step(bench: Bench, peer: str, model: str):
    step, opt = m._train_step(bench, 'linen' if peer == REUSE else peer, model)
    _, p = _impl(bench, peer, model)
    return step, opt.init(p), p


def measure_train_trace(bench: Bench, model: str, label: str, target: str, reps: int) -> Row:
    states = {}

    def work(peer):
        if peer not in states:
            states[peer] = _step(bench, peer, model)[1]
        step, _, p = _step(bench, peer, model)
        return lambda: jax.make_jaxpr(step)(p, states[peer], bench.inputs[model])

    return _row(bench, f'reuse_train_trace_{model}', label, target, model, work, reps)


def measure_train_first(bench: Bench, model: str, label: str, target: str, reps: int) -> Row:
    """Trace + lower + compile of a fresh train step: the wait before the first step runs."""

    def work(peer):
        step, state, p = _step(bench, peer, model)
        fresh = jax.jit(step)
        return lambda: fresh.lower(p, state, bench.inputs[model]).compile()

    return _row(
        bench, f'reuse_train_compile_{model}', label, target, model, work, reps, warmup=False
    )


def measure_hlo(bench: Bench, model: str, label: str) -> Row:
    """The optimized program with reuse on is the pure JAX one (and the reuse-off one)."""
    row = Row(f'reuse_hlo_{model}', label, 'identical', 'instructions')
    prints = {}
    for peer in ('jax', 'linen', REUSE):
        if peer != 'jax' and 'linen' not in bench.available(model):
            continue
        impl, p = _impl(bench, peer, model)
        with _reusing(peer):
            text = jax.jit(lambda q, y, f=impl.apply: f(q, y)).lower(p, bench.inputs[model])
            text = text.compile().as_text()
        prints[peer] = summarize(text)
    base = prints['jax']
    row.cells['jax'] = f'baseline, {base.instructions} instr.'
    if REUSE in prints:
        verdicts = []
        for peer, word in (('linen', 'off'), (REUSE, 'on')):
            same = prints[peer].fingerprint == base.fingerprint
            verdicts.append(f'{word}: {"identical" if same else "differs"}')
            row.extra[peer] = {'identical_to_jax': same, 'instructions': prints[peer].instructions}
        row.cells['linen'] = ', '.join(verdicts) + f', {prints[REUSE].instructions} instr.'
    for peer in bench.peers:
        if peer.name not in ('jax', 'linen') and (peer.name, None) not in bench.unavailable:
            row.cells[peer.name] = '— (reuse is linen only)'
    m._fill_unavailable(bench, row, model)
    return row
