"""Where linen's time goes beyond pure JAX: per module class and per function.

For each case (a measure of the table on one model) the report gives

* **the gap**: medians of pure JAX and linen, sampled interleaved with no profiler
  running, and their difference;
* **per module class**: calls per run, and the time per call inclusive of submodules
  and without them ("own"), from a timing method wrapper registered through linen's
  own ``linen_method_wrapper`` hook (outermost, so a module's time includes its
  profiling label; the clock's own cost, about a microsecond a call, is in it too),
  collector off;
  beside it, the time per call of the pure JAX function that issues the same JAX
  operations (``models_jax._dense`` for ``Dense``, ``_layer_norm``, ``_attention``
  with its four projections for ``MultiHeadDotProductAttention`` inclusive), timed
  the same way in the pure JAX run, collector off too;
* **per function**: cProfile of both over the same repetitions, collector off; every
  function linen calls more often than pure JAX, costed as its extra calls times its
  own time per call in linen's profile, and that cost summed by where the code lives
  (linen's packages, JAX, Python). cProfile inflates every call alike, so read the
  shares, not the profiled milliseconds;
* **garbage collection**: collections per run of each generation and their time,
  with the collector on as in the table (gen 2 collections walk every object of the
  process, so they cost tens of milliseconds each and land in whichever sample
  happens to trigger them).

The same pure JAX baseline as the table: parameters + one forward pass for the trace
of ``init``, parameters only for ``lazy_init``.
"""

from __future__ import annotations

import collections
import contextlib
import cProfile
import dataclasses
import gc
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax

from benchmarks._bench import Bench
from benchmarks._rows import human_seconds

LINEN = 'linen'
BASELINE = 'jax'


@dataclasses.dataclass(frozen=True)
class Case:
    """One measure on one model, as a zero-argument run for pure JAX and for linen."""

    key: str
    title: str
    model: str
    runs: dict[str, Callable[[], Any]]
    calls_per_run: int = 1  # runs repeated inside one sample (per-call measures)


def cases(bench: Bench) -> list[Case]:
    """The cases whose gap the table's targets are about."""
    out = []
    for model in ('mlp', 'transformer'):
        if not _has(bench, model):
            continue
        jax_impl, linen_impl = bench.impls[BASELINE][model], bench.impls[LINEN][model]
        x, key = bench.inputs[model], bench.key
        pj, pl = bench.params[BASELINE][model], bench.params[LINEN][model]
        out.append(
            Case(
                f'trace_{model}',
                f'trace of apply, {model}',
                model,
                {
                    BASELINE: lambda a=jax_impl.apply, p=pj, x=x: jax.make_jaxpr(
                        lambda p, x: a(p, x)
                    )(p, x),
                    LINEN: lambda a=linen_impl.apply, p=pl, x=x: jax.make_jaxpr(
                        lambda p, x: a(p, x)
                    )(p, x),
                },
            )
        )

        def params_forward(k, x, impl=jax_impl):
            params = impl.init(k, x)
            return params, impl.apply(params, x)

        out.append(
            Case(
                f'init_trace_{model}',
                f'trace of init (pure JAX: params + forward), {model}',
                model,
                {
                    BASELINE: lambda f=params_forward, k=key, x=x: jax.make_jaxpr(
                        lambda k, x: f(k, x)
                    )(k, x),
                    LINEN: lambda i=linen_impl.init, k=key, x=x: jax.make_jaxpr(
                        lambda k, x: i(k, x)
                    )(k, x),
                },
            )
        )
        shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
        out.append(
            Case(
                f'lazy_init_{model}',
                f'lazy_init (pure JAX: params only), {model}',
                model,
                {
                    BASELINE: lambda i=jax_impl.init, k=key, x=x: jax.block_until_ready(i(k, x)),
                    LINEN: lambda i=linen_impl.lazy_init, k=key, s=shape: jax.block_until_ready(
                        i(k, s)
                    ),
                },
            )
        )
    if _has(bench, 'tiny'):
        calls = 50
        x = bench.inputs['tiny']

        def eager(apply, params, x=x, calls=calls):
            for _ in range(calls):
                jax.block_until_ready(apply(params, x))

        out.append(
            Case(
                'apply_eager_tiny',
                'eager apply, tiny MLP (per call)',
                'tiny',
                {
                    BASELINE: lambda: eager(
                        bench.impls[BASELINE]['tiny'].apply, bench.params[BASELINE]['tiny']
                    ),
                    LINEN: lambda: eager(
                        bench.impls[LINEN]['tiny'].apply, bench.params[LINEN]['tiny']
                    ),
                },
                calls_per_run=calls,
            )
        )
    return out


def _has(bench: Bench, model: str) -> bool:
    return all(model in bench.impls.get(p, {}) for p in (BASELINE, LINEN))


@contextlib.contextmanager
def _collector_off():
    """The garbage collector off (after a full collection): a gen 2 pause would land on
    whichever module or function runs then. Collections are reported on their own."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# -- the gap ----------------------------------------------------------------------------


def _gap(case: Case, reps: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {BASELINE: [], LINEN: []}
    names = [BASELINE, LINEN]
    for name in names:  # warm JAX's caches and linen's
        case.runs[name]()
    for rep in range(reps):
        for name in names[rep % 2 :] + names[: rep % 2]:
            start = time.perf_counter()
            case.runs[name]()
            samples[name].append((time.perf_counter() - start) / case.calls_per_run)
    return {n: statistics.median(v) for n, v in samples.items()}


# -- per module class -------------------------------------------------------------------


class ModuleClock:
    """A ``linen_method_wrapper`` plugin timing every Module method call.

    ``stats[label] = [calls, inclusive seconds, own seconds]``; ``label`` is the class
    name, plus ``.method`` for methods other than ``__call__``.
    """

    def __init__(self):
        self.stats: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0.0])
        self._children: list[float] = []

    def wrapper(self, next_fn, args, kwargs, context):
        children = self._children
        children.append(0.0)
        start = time.perf_counter()
        try:
            return next_fn(*args, **kwargs)
        finally:
            inclusive = time.perf_counter() - start
            inner = children.pop()
            if children:
                children[-1] += inclusive
            label = type(context.module).__name__
            if context.method_name != '__call__':
                label += f'.{context.method_name}'
            entry = self.stats[label]
            entry[0] += 1
            entry[1] += inclusive
            entry[2] += inclusive - inner


def _per_module(case: Case, runs: int) -> dict[str, list]:
    from linen.core import plugin_bus
    from linen.core.hookspecs import hookimpl

    clock = ModuleClock()

    class Plugin:
        @staticmethod
        @hookimpl
        def linen_method_wrapper():
            return clock.wrapper

    name = plugin_bus.register(Plugin, name='benchmarks-module-clock')
    try:
        case.runs[LINEN]()
        clock.stats.clear()
        with _collector_off():
            for _ in range(runs):
                case.runs[LINEN]()
    finally:
        plugin_bus.unregister(name)
    return {k: [v[0] / runs, v[1] / runs, v[2] / runs] for k, v in clock.stats.items()}


# The pure JAX functions that issue the operations a linen module class issues: the
# forward function, and in the init cases the parameter function too.
COUNTERPARTS = {
    'Dense': ('_dense', '_dense_init'),
    'LayerNorm': ('_layer_norm', '_ln_init'),
    'MultiHeadDotProductAttention': ('_attention', '_attn_init'),
}


def _per_counterpart(case: Case, runs: int) -> dict[str, list]:
    """``{linen class: [calls, seconds]}`` per run of the pure JAX counterparts (calls:
    of whichever of its functions ran most often)."""
    from benchmarks import models_jax

    stats: dict[tuple[str, str], list] = collections.defaultdict(lambda: [0, 0.0])
    originals = {fn: getattr(models_jax, fn) for fns in COUNTERPARTS.values() for fn in fns}
    owner = {fn: cls for cls, fns in COUNTERPARTS.items() for fn in fns}

    def timed(name, fn):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                entry = stats[(owner[name], name)]
                entry[0] += 1
                entry[1] += time.perf_counter() - start

        return call

    for name, fn in originals.items():
        setattr(models_jax, name, timed(name, fn))
    try:
        case.runs[BASELINE]()
        stats.clear()
        with _collector_off():
            for _ in range(runs):
                case.runs[BASELINE]()
    finally:
        for name, fn in originals.items():
            setattr(models_jax, name, fn)
    out: dict[str, list] = {}
    for (cls, _), (calls, seconds) in stats.items():
        entry = out.setdefault(cls, [0.0, 0.0])
        entry[0] = max(entry[0], calls / runs)
        entry[1] += seconds / runs
    return out


# -- per function -----------------------------------------------------------------------


def _area(filename: str) -> str:
    path = filename.replace('\\', '/')
    if '/linen/' in path or '/linen-' in path:
        tail = path.split('/linen/', 1)[-1] if '/linen/' in path else path
        return 'linen.' + tail.split('/', 1)[0]
    if '/jax/' in path or '/jaxlib/' in path:
        return 'JAX'
    if path == '~' or '/python3.' in path or path.startswith('<'):
        return 'Python (builtins, stdlib)'
    return 'other'


def _function_key(filename: str, line: int, name: str) -> tuple[str, str]:
    path = filename.replace('\\', '/')
    for marker in ('site-packages/', '/src/'):
        if marker in path:
            path = path.rsplit(marker, 1)[-1]
    return (path if path != '~' else 'builtin', f'{name}' if path == '~' else f'{name}:{line}')


def _profile(run: Callable[[], Any], runs: int) -> dict[tuple, list[float]]:
    run()
    prof = cProfile.Profile()
    with _collector_off():
        prof.enable()
        for _ in range(runs):
            run()
        prof.disable()
    out: dict[tuple, list[float]] = {}
    for (filename, line, name), (_, ncalls, tottime, _, _) in pstats.Stats(prof).stats.items():
        key = (_area(filename), *_function_key(filename, line, name))
        entry = out.setdefault(key, [0.0, 0.0])
        entry[0] += ncalls / runs
        entry[1] += tottime / runs
    return out


def _per_function(case: Case, runs: int) -> tuple[dict, dict, list]:
    """The functions linen calls more often than pure JAX, with the own time those
    extra calls cost (extra calls × linen's own time per call of that function).

    Differences of two profiled totals drown in noise; a function's own time per
    call is averaged over every call, and the extra calls are exact.
    """
    base = _profile(case.runs[BASELINE], runs)
    ours = _profile(case.runs[LINEN], runs)
    totals = (sum(v[1] for v in base.values()), sum(v[1] for v in ours.values()))
    areas: dict[str, float] = collections.defaultdict(float)
    rows = []
    for key, (calls, seconds) in ours.items():
        extra_calls = calls - base.get(key, [0.0, 0.0])[0]
        if extra_calls <= 0 or calls <= 0:
            continue
        extra = extra_calls * seconds / calls
        areas[key[0]] += extra
        rows.append((extra, extra_calls, key))
    rows.sort(key=lambda r: -r[0])
    return {'profiled_jax': totals[0], 'profiled_linen': totals[1]}, dict(areas), rows


# -- garbage collection -----------------------------------------------------------------


def _gc(run: Callable[[], Any], runs: int) -> dict[int, tuple[float, float]]:
    run()
    counts: dict[int, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    started: list[float] = []

    def listen(phase, info):
        if phase == 'start':
            started.append(time.perf_counter())
        elif started:
            entry = counts[info['generation']]
            entry[0] += 1
            entry[1] += time.perf_counter() - started.pop()

    gc.collect()
    gc.callbacks.append(listen)
    try:
        for _ in range(runs):
            run()
    finally:
        gc.callbacks.remove(listen)
    return {g: (c / runs, s / runs) for g, (c, s) in sorted(counts.items())}


# -- the report -------------------------------------------------------------------------


def report(bench: Bench, reps: int, profile_runs: int, log=print) -> str:
    """The Markdown report of every case."""
    lines = [
        '# Where linen spends the time pure JAX does not',
        '',
        (__doc__ or '').split('\n\n', 1)[1].strip(),
        '',
        f'JAX {jax.__version__}; {reps} interleaved repetitions for the gap, '
        f'{profile_runs} profiled runs per library and case.',
    ]
    for case in cases(bench):
        log(f'  overhead: {case.key}')
        lines += ['', f'## {case.title}', '']
        medians = _gap(case, reps)
        gap = medians[LINEN] - medians[BASELINE]
        lines.append(
            f'pure JAX {human_seconds(medians[BASELINE])}, linen {human_seconds(medians[LINEN])}'
            f' (×{medians[LINEN] / medians[BASELINE]:.2f}): linen spends '
            f'{human_seconds(gap)} more per call.'
        )
        modules = _per_module(case, profile_runs)
        counterparts = _per_counterpart(case, profile_runs)
        per = case.calls_per_run
        lines += [
            '',
            '| module | calls | inclusive per call | own per call | own, all calls '
            '| pure JAX counterpart per call |',
            '|---|---:|---:|---:|---:|---:|',
        ]
        for label, (calls, inclusive, own) in sorted(modules.items(), key=lambda kv: -kv[1][2]):
            c = calls / per
            twin = counterparts.get(label)
            twin_cell = human_seconds(twin[1] / twin[0]) if twin and twin[0] else '—'
            lines.append(
                f'| `{label}` | {c:g} | {human_seconds(inclusive / calls)} | '
                f'{human_seconds(own / calls)} | {human_seconds(own / per)} | {twin_cell} |'
            )
        totals, areas, rows = _per_function(case, profile_runs)
        extra = sum(areas.values())
        lines += [
            '',
            f'Profiled (cProfile, collector off): pure JAX '
            f'{human_seconds(totals["profiled_jax"] / per)}, linen '
            f'{human_seconds(totals["profiled_linen"] / per)} per call; the calls linen makes '
            f"beyond pure JAX's cost {human_seconds(extra / per)} of it, by where the code "
            'lives:',
            '',
            '| code | share |',
            '|---|---:|',
        ]
        for area, seconds in sorted(areas.items(), key=lambda kv: -kv[1]):
            if extra > 0 and seconds / extra >= 0.005:
                lines.append(f'| {area} | {seconds / extra:.0%} |')
        lines += [
            '',
            '| function (the 15 costliest extra calls) | extra calls per call | share |',
            '|---|---:|---:|',
        ]
        for seconds, calls, (_, path, name) in rows[:15]:
            where = name if path == 'builtin' else f'{path}:{name}'
            lines.append(f'| `{where}` | {calls / per:+g} | {seconds / extra:.1%} |')
        collections_ = {n: _gc(case.runs[n], profile_runs) for n in (BASELINE, LINEN)}
        lines += [
            '',
            '| garbage collection per call | gen 0 | gen 1 | gen 2 | time |',
            '|---|---:|---:|---:|---:|',
        ]
        for name, label in ((BASELINE, 'pure JAX'), (LINEN, 'linen')):
            got = collections_[name]
            cells = [f'{got.get(g, (0.0, 0.0))[0] / per:.2f}' for g in (0, 1, 2)]
            spent = sum(s for _, s in got.values()) / per
            lines.append(f'| {label} | {" | ".join(cells)} | {human_seconds(spent)} |')
    return '\n'.join(lines) + '\n'
