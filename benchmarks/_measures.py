"""The measures of the benchmark table, each producing one or more :class:`Row`."""

from __future__ import annotations

import cProfile
import functools
import io
import os
import pstats
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks._bench import Bench
from benchmarks._hlo import summarize
from benchmarks._impl import Impl
from benchmarks._rows import Row, human_seconds, unavailable_cell
from benchmarks._timing import median, per_call, timed

BASELINE = 'jax'
# One untimed round before timing (JAX compiles each primitive's eager kernel once).
WARMUP = True


def _fill_unavailable(bench: Bench, row: Row, model: str | None) -> None:
    for peer in bench.peers:
        if peer.name in row.cells:
            continue
        reason = bench.unavailable.get((peer.name, None))
        if reason is None and model is not None:
            reason = bench.reason(peer.name, model)
        row.cells[peer.name] = unavailable_cell(reason or 'not measured')
        row.medians[peer.name] = None
        row.ratios[peer.name] = None


def _sample_peers(
    bench: Bench,
    model: str,
    sample: Callable[[str], float],
    reps: int,
    extra: tuple[str, ...] = (),
) -> dict[str, list[float]]:
    """Interleaved repetitions of ``sample`` over the peers that have ``model``.

    ``extra`` names further baselines (e.g. :data:`PARAMS_FORWARD`) sampled in the
    same round-robin. A peer whose sample raises (linen only; others re-raise) drops
    out of the row.
    """
    names = [*bench.available(model), *extra]
    samples: dict[str, list[float]] = {n: [] for n in names}
    for rep in range(reps):
        shift = rep % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            if name not in samples:
                continue
            try:
                samples[name].append(sample(name))
            except Exception as exc:
                bench.mark_unavailable(name, model, exc)
                del samples[name]
    return samples


# A second pure JAX baseline for the init rows: parameters and one forward pass,
# which is what Flax-style ``init`` computes.
PARAMS_FORWARD = 'jax_params_forward'


def _spread(values: list[float], base: list[float] | None) -> tuple[float, float]:
    """Lowest and highest per-repetition ratio to the baseline sampled in the same round.

    Peers are sampled round-robin, so repetition ``i`` of a peer and of the baseline
    saw the same machine; their ratio cancels most of the noise a median hides.
    """
    if not base:
        return (float('nan'), float('nan'))
    ratios = [v / b for v, b in zip(values, base) if b > 0]
    return (min(ratios), max(ratios)) if ratios else (float('nan'), float('nan'))


def _ratio_row(
    bench: Bench,
    row: Row,
    model: str,
    sample: Callable[[str], float],
    reps: int,
    warmup: bool = True,
    base_name: str = BASELINE,
    extra: tuple[str, ...] = (),
) -> Row:
    """Fill ``row`` with medians of ``sample``, their ratios to ``base_name`` and the spread.

    A cell reads ``×median-ratio (median time; lowest–highest per-repetition ratio)``.
    """
    if warmup and WARMUP:
        _sample_peers(bench, model, sample, 1, extra)
    samples = _sample_peers(bench, model, sample, reps, extra)
    base_values = samples.get(base_name)
    base = median(base_values) if base_values else None
    for name, values in samples.items():
        m = median(values)
        lo, hi = _spread(values, base_values)
        row.samples[name] = values
        row.medians[name] = m
        row.ratios[name] = m / base if base else None
        row.extra.setdefault('spread', {})[name] = [lo, hi]
        ratio = f'×{m / base:.2f}' if base else '—'
        spread = f'; ×{lo:.2f}–{hi:.2f}' if base and len(values) > 1 else ''
        row.cells[name] = f'{ratio} ({human_seconds(m)}{spread})'
    if base_name != BASELINE and BASELINE in row.cells and base_name in row.cells:
        # The baseline column shows both pure JAX figures.
        row.cells[BASELINE] += f', params + forward {row.cells[base_name]}'
    for name in extra:
        row.cells.pop(name, None)
    _fill_unavailable(bench, row, model)
    return row


# 1. import ---------------------------------------------------------------------------

_IMPORT_SCRIPT = """
import time
import jax
t0 = time.perf_counter()
{stmt}
print(time.perf_counter() - t0)
"""

_IMPORT_JAX_SCRIPT = """
import time
t0 = time.perf_counter()
import jax
print(time.perf_counter() - t0)
"""


# Bytecode for the import measure: a user's interpreter reads the .pyc files its
# installer wrote. Without them (PYTHONDONTWRITEBYTECODE, or `uv pip install`, which
# compiles nothing) every run compiles every source file again and the row measures
# the compiler: `import jax` read 3.6 s. The cache lives outside the source trees.
_PYCACHE = Path(tempfile.gettempdir()) / 'linen-bench-pycache'


def _import_env() -> dict[str, str]:
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get('JAX_PLATFORMS', 'cpu'))
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    env['PYTHONPYCACHEPREFIX'] = str(_PYCACHE)
    return env


def _run_import(script: str) -> float:
    env = _import_env()
    proc = subprocess.run(
        [sys.executable, '-c', script], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f'exit status {proc.returncode}'])[-1]
        raise ImportError(last)
    return float(proc.stdout.strip().splitlines()[-1])


def measure_import(bench: Bench, reps: int) -> Row:
    """Seconds a fresh process spends importing each library after ``import jax``."""
    row = Row(
        'import',
        'import, seconds over `import jax` (fresh process)',
        '≤ +0.05, plugin discovery included',
        's',
    )
    scripts = {
        p.name: _IMPORT_JAX_SCRIPT
        if p.import_stmt is None
        else _IMPORT_SCRIPT.format(stmt=p.import_stmt)
        for p in bench.peers
    }
    names = list(scripts)
    samples: dict[str, list[float]] = {n: [] for n in names}
    failures: dict[str, str] = {}
    for name in names if WARMUP else ():  # untimed: writes the bytecode the timed runs read
        try:
            _run_import(scripts[name])
        except ImportError as exc:
            failures[name] = str(exc)
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            if name in failures:
                continue
            try:
                samples[name].append(_run_import(scripts[name]))
            except ImportError as exc:
                failures[name] = str(exc)
    for name in names:
        if name in failures:
            row.cells[name] = unavailable_cell(failures[name])
            row.medians[name] = None
            continue
        m = median(samples[name])
        row.samples[name] = samples[name]
        row.medians[name] = m
        row.cells[name] = f'`import jax` = {m:.2f} s' if name == BASELINE else f'+{m:.2f} s'
    return row


# 2. trace ----------------------------------------------------------------------------


def _trace_once(bench: Bench, peer: str, model: str) -> None:
    apply = bench.impls[peer][model].apply
    # A fresh function object each time, so no tracing cache can answer.
    jax.make_jaxpr(lambda p, x: apply(p, x))(bench.params[peer][model], bench.inputs[model])


def measure_trace(bench: Bench, model: str, label: str, target: str, reps: int) -> Row:
    row = Row(f'trace_{model}', label, target, 's', chart=True)
    return _ratio_row(
        bench, row, model, lambda peer: timed(lambda: _trace_once(bench, peer, model)), reps
    )


def _eager_apply_once(bench: Bench, peer: str, model: str) -> None:
    apply = bench.impls[peer][model].apply
    jax.block_until_ready(apply(bench.params[peer][model], bench.inputs[model]))


def measure_trace_calls(
    bench: Bench,
    model: str,
    label: str,
    profile_dir: Path | None = None,
    eager: bool = False,
    target: str = 'fewer is better',
) -> Row:
    """Python function calls during one trace (cProfile): a noise-free companion.

    ``eager``: during one eager ``apply`` instead (the eager-apply row's companion).
    """
    kind = 'eager' if eager else 'trace'
    run = _eager_apply_once if eager else _trace_once
    row = Row(f'pycalls_{kind}_{model}', label, target, 'calls', chart=True)

    def count(peer: str) -> float:
        run(bench, peer, model)  # warm JAX's own caches first, as in the timing
        prof = cProfile.Profile()
        prof.enable()
        run(bench, peer, model)
        prof.disable()
        stats = pstats.Stats(prof)
        if profile_dir is not None:
            buf = io.StringIO()
            stats.stream = buf
            stats.sort_stats('tottime').print_stats(20)
            stats.sort_stats('cumulative').print_stats(20)
            (profile_dir / f'{kind}_{model}_{peer}.txt').write_text(buf.getvalue())
        return float(stats.total_calls)

    samples = _sample_peers(bench, model, count, 1)
    base = samples.get(BASELINE, [None])[0]
    for name, (calls,) in samples.items():
        row.samples[name] = [calls]
        row.medians[name] = calls
        row.ratios[name] = calls / base if base else None
        ratio = f'×{calls / base:.2f}' if base else '—'
        row.cells[name] = f'{ratio} ({int(calls):,} calls)'
    _fill_unavailable(bench, row, model)
    return row


# 3. init -----------------------------------------------------------------------------


def _params_forward(bench: Bench, model: str) -> Callable[[Any, Any], Any]:
    """Pure JAX parameters plus one forward pass: what a Flax-style ``init`` computes."""
    impl = bench.impls[BASELINE][model]

    def init_and_forward(key, x):
        params = impl.init(key, x)
        return params, impl.apply(params, x)

    return init_and_forward


def _init_fn(bench: Bench, peer: str, model: str) -> Callable[[Any, Any], Any]:
    if peer == PARAMS_FORWARD:
        return _params_forward(bench, model)
    return bench.impls[peer][model].init


def measure_init_eager(bench: Bench, model: str, label: str, target: str, reps: int) -> Row:
    """Eager ``init``; ratios to pure JAX parameters + one forward pass."""
    row = Row(f'init_eager_{model}', label, target, 's', chart=True)

    def sample(peer: str) -> float:
        init = _init_fn(bench, peer, model)
        return timed(lambda: jax.block_until_ready(init(bench.key, bench.inputs[model])))

    return _ratio_row(
        bench, row, model, sample, reps, base_name=PARAMS_FORWARD, extra=(PARAMS_FORWARD,)
    )


def measure_init_trace(bench: Bench, model: str, label: str, target: str, reps: int) -> Row:
    """``jax.make_jaxpr`` of ``init`` (fresh function): the library's share of a jitted init.

    The first call of ``jax.jit(init)`` on the big models is dominated by XLA compiling
    the random number generators (tens of seconds, the same for every library); tracing
    alone shows what the library adds. Ratios are to pure JAX parameters + forward.
    """
    row = Row(f'init_trace_{model}', label, target, 's', chart=True)

    def sample(peer: str) -> float:
        init = _init_fn(bench, peer, model)
        return timed(
            lambda: jax.make_jaxpr(lambda k, x: init(k, x))(bench.key, bench.inputs[model])
        )

    return _ratio_row(
        bench, row, model, sample, reps, base_name=PARAMS_FORWARD, extra=(PARAMS_FORWARD,)
    )


def measure_lazy_init(bench: Bench, model: str, label: str, target: str, reps: int) -> Row:
    """Variables from a ``jax.ShapeDtypeStruct`` input, eagerly; ratio to pure JAX params only.

    Flax and linen call ``lazy_init``; pure JAX and Equinox build parameters without a
    forward pass anyway; Haiku has no lazy init, so its ``init`` runs on a zero input.
    """
    row = Row(f'lazy_init_{model}', label, target, 's', chart=True)
    x = bench.inputs[model]
    shape = jax.ShapeDtypeStruct(x.shape, x.dtype)

    def sample(peer: str) -> float:
        impl = bench.impls[peer][model]
        if impl.lazy_init is not None:
            return timed(lambda: jax.block_until_ready(impl.lazy_init(bench.key, shape)))
        zeros = jnp.zeros(x.shape, x.dtype)
        return timed(lambda: jax.block_until_ready(impl.init(bench.key, zeros)))

    return _ratio_row(bench, row, model, sample, reps)


def measure_init_jit_first(bench: Bench, model: str, label: str, reps: int) -> Row:
    """First call of ``jax.jit(init)``: trace, compile and run, with nothing cached."""
    row = Row(f'init_jit_first_{model}', label, '—', 's', chart=True)

    def sample(peer: str) -> float:
        init = bench.impls[peer][model].init
        fresh = jax.jit(lambda k, x: init(k, x))
        return timed(lambda: jax.block_until_ready(fresh(bench.key, bench.inputs[model])))

    return _ratio_row(bench, row, model, sample, reps)


# 4. per-call overheads ---------------------------------------------------------------


def measure_apply_eager(
    bench: Bench, model: str, label: str, target: str, reps: int, calls: int
) -> Row:
    row = Row(f'apply_eager_{model}', label, target, 's', chart=True)

    def sample(peer: str) -> float:
        apply = bench.impls[peer][model].apply
        p, x = bench.params[peer][model], bench.inputs[model]
        return per_call(lambda: jax.block_until_ready(apply(p, x)), calls)

    return _ratio_row(bench, row, model, sample, reps)


def measure_apply_jit_dispatch(bench: Bench, model: str, label: str, reps: int, calls: int) -> Row:
    """Per-call time of an already compiled ``jax.jit(apply)``, results not awaited."""
    row = Row(f'apply_jit_{model}', label, '—', 's', chart=True)
    jitted = {}

    def sample(peer: str) -> float:
        if peer not in jitted:
            jitted[peer] = jax.jit(bench.impls[peer][model].apply)
        f, p, x = jitted[peer], bench.params[peer][model], bench.inputs[model]
        jax.block_until_ready(f(p, x))
        t = per_call(lambda: f(p, x), calls)
        jax.block_until_ready(f(p, x))
        return t

    return _ratio_row(bench, row, model, sample, reps)


# 4b. lifted jit over instances of one class ------------------------------------------

# JAX reports each XLA compilation under this event (jax 0.10 and 0.12 alike).
COMPILE_EVENT = '/jax/core/compile/backend_compile_duration'


def _count_compiles(fn: Callable[[], Any]) -> int:
    count = 0

    def listen(event, duration, **kwargs):
        nonlocal count
        if event == COMPILE_EVENT:
            count += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        jax.block_until_ready(fn())
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return count


def _jit_tower(peer: str, width: int, instances: int):
    """``instances`` lifted-jit instances of one fresh class, as an :class:`Impl`; ``None``
    for a library without a lifted jit (Haiku)."""
    if peer == 'jax':
        from benchmarks.models_jax import jit_tower

        return jit_tower(width, instances)
    if peer == 'equinox':
        from benchmarks.models_equinox import jit_tower

        return jit_tower(width, instances)
    if peer in ('flax', 'linen'):
        import importlib

        from benchmarks.models_flax_style import flax_style_jit_tower

        nn = importlib.import_module('flax.linen' if peer == 'flax' else 'linen.nn')
        tower = flax_style_jit_tower(nn, width, instances)
        return Impl(tower.init, tower.apply)
    return None


def measure_jit_instances(bench: Bench, label: str, instances: int = 10) -> Row:
    """XLA compilations of the first and of a later apply of ``instances`` lifted-jit
    instances of one class (profiling labels on, the default).

    A tower of one instance of other fresh classes runs first, so what JAX compiles
    once per process (eager kernels, initialiser shapes) is not counted.
    """
    row = Row('jit_instances_compiles', label, '1 compile', 'compiles')
    width = bench.sizes.tiny_width
    x = jnp.ones((bench.sizes.tiny_batch, width))
    base = None
    for peer in bench.peers:
        name = peer.name
        if (name, None) in bench.unavailable:
            continue
        try:
            warm = _jit_tower(name, width, 1)
            if warm is None:
                row.cells[name] = '— (no lifted jit of a module)'
                row.medians[name] = row.ratios[name] = None
                continue
            warm_params = warm.init(bench.key, x)
            jax.block_until_ready(warm.apply(warm_params, x))
            tower = _jit_tower(name, width, instances)
            params = tower.init(bench.key, x)
            run = functools.partial(tower.apply, params, x)
            first = _count_compiles(run)
            later = _count_compiles(run)
        except Exception as exc:
            bench.mark_unavailable(name, 'jit_tower', exc)  # re-raises but for linen
            row.cells[name] = unavailable_cell(bench.reason(name, 'jit_tower') or '')
            row.medians[name] = row.ratios[name] = None
            continue
        if name == BASELINE:
            base = first
        row.samples[name] = [float(first), float(later)]
        row.medians[name] = float(first)
        row.extra[name] = {'first_apply': first, 'later_apply': later}
        row.cells[name] = f'{first} (then {later} per apply)'
    for name, value in row.medians.items():
        if value is not None and base:
            row.ratios[name] = value / base
    _fill_unavailable(bench, row, None)
    return row


# 5. compiled program -----------------------------------------------------------------


def measure_hlo(bench: Bench, model: str, label: str, hlo_dir: Path | None = None) -> Row:
    """Optimized HLO of ``jax.jit(apply)``: size, and structural identity with pure JAX."""
    row = Row(f'hlo_{model}', label, 'identical', 'instructions')
    summaries = {}
    for peer in bench.available(model):
        apply = bench.impls[peer][model].apply
        try:
            text = (
                jax.jit(apply)
                .lower(bench.params[peer][model], bench.inputs[model])
                .compile()
                .as_text()
            )
        except Exception as exc:
            bench.mark_unavailable(peer, model, exc)
            continue
        if hlo_dir is not None:
            (hlo_dir / f'{model}_{peer}.hlo.txt').write_text(text)
        summaries[peer] = summarize(text)
    base = summaries.get(BASELINE)
    for peer, s in summaries.items():
        row.medians[peer] = float(s.instructions)
        same = base is not None and s.fingerprint == base.fingerprint
        verdict = 'baseline' if peer == BASELINE else ('identical' if same else 'differs')
        row.cells[peer] = f'{verdict}, {s.instructions} instr.'
        row.extra[peer] = {
            'identical_to_jax': same,
            'instructions': s.instructions,
            'entry_instructions': s.entry_instructions,
            'fingerprint': s.fingerprint,
            'opcodes': dict(s.opcodes),
        }
    _fill_unavailable(bench, row, model)
    return row


def measure_step(bench: Bench, model: str, label: str, reps: int, calls: int) -> Row:
    """Run time of the compiled apply, each call awaited."""
    row = Row(f'step_{model}', label, '1.00 ± noise', 's', chart=True)
    compiled = {}

    def sample(peer: str) -> float:
        p, x = bench.params[peer][model], bench.inputs[model]
        if peer not in compiled:
            compiled[peer] = jax.jit(bench.impls[peer][model].apply).lower(p, x).compile()
        f = compiled[peer]
        return per_call(lambda: jax.block_until_ready(f(p, x)), calls)

    return _ratio_row(bench, row, model, sample, reps)


# 5b. train step ---------------------------------------------------------------------


def _train_step(bench: Bench, peer: str, model: str):
    """``(step, opt)``: ``value_and_grad`` of a mean-square loss and an optax Adam update."""
    import optax

    apply = bench.impls[peer][model].apply
    opt = optax.adam(1e-3)

    def loss(p, x):
        y = apply(p, x)
        return jnp.mean(y * y)

    def step(p, state, x):
        value, grads = jax.value_and_grad(loss)(p, x)
        updates, state = opt.update(grads, state, p)
        return optax.apply_updates(p, updates), state, value

    return step, opt


def measure_train_trace(bench: Bench, model: str, label: str, reps: int) -> Row:
    """``jax.make_jaxpr`` of a fresh train step: forward, backward and optimizer update."""
    row = Row(f'train_trace_{model}', label, '≤ ×1.10', 's', chart=True)
    x = bench.inputs[model]
    states = {}

    def sample(peer: str) -> float:
        p = bench.params[peer][model]
        if peer not in states:
            states[peer] = _train_step(bench, peer, model)[1].init(p)
        # A fresh step function each time, so no tracing cache can answer.
        step, _ = _train_step(bench, peer, model)
        return timed(lambda: jax.make_jaxpr(step)(p, states[peer], x))

    return _ratio_row(bench, row, model, sample, reps)


def measure_train_step(bench: Bench, model: str, label: str, reps: int, calls: int) -> Row:
    """Run time of the compiled train step, each call awaited (compiled once per peer)."""
    row = Row(f'train_step_{model}', label, '1.00 ± noise', 's', chart=True)
    compiled = {}
    x = bench.inputs[model]

    def sample(peer: str) -> float:
        p = bench.params[peer][model]
        if peer not in compiled:
            step, opt = _train_step(bench, peer, model)
            state = opt.init(p)
            compiled[peer] = (jax.jit(step).lower(p, state, x).compile(), state)
        f, state = compiled[peer]
        return per_call(lambda: jax.block_until_ready(f(p, state, x)), calls)

    return _ratio_row(bench, row, model, sample, reps)


# 6. compile time, scanned vs unrolled ------------------------------------------------


def measure_compile(bench: Bench, model: str, label: str, reps: int) -> Row:
    """``jax.jit(apply).lower(...).compile()`` of a fresh function: what a first call waits for."""
    row = Row(f'compile_{model}', label, '—', 's', chart=True)

    def sample(peer: str) -> float:
        apply = bench.impls[peer][model].apply
        p, x = bench.params[peer][model], bench.inputs[model]
        fresh = jax.jit(lambda q, y: apply(q, y))
        return timed(lambda: fresh.lower(p, x).compile())

    # No warm-up round: compiling is slow and JAX caches nothing across fresh functions.
    return _ratio_row(bench, row, model, sample, reps, warmup=False)


def unrolled_over_scanned(bench: Bench, scan: Row, unrolled: Row) -> Row:
    row = Row(
        'compile_unrolled_over_scan', 'lower + compile, unrolled ÷ scanned (same library)', '—', '×'
    )
    for peer in bench.peers:
        a, b = unrolled.medians.get(peer.name), scan.medians.get(peer.name)
        if a is None or b is None:
            continue
        row.medians[peer.name] = a / b
        row.cells[peer.name] = f'×{a / b:.2f}'
    _fill_unavailable(bench, row, 'scan')
    return row
