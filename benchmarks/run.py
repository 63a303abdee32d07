"""Run the benchmarks: ``python -m benchmarks.run [--smoke] [--out bench-out]``.

Writes ``results.md``, ``results.json``, ``ratios.png``, the optimized HLO of every
compared program (``hlo/``) and cProfile listings of each trace (``profiles/``).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import jax

from benchmarks import _measures as m
from benchmarks import _overhead
from benchmarks import _reuse_rows as _reuse
from benchmarks._bench import build
from benchmarks._peers import PEER_NAMES, PEERS
from benchmarks._report import environment, write
from benchmarks._sizes import FULL, SMOKE


@dataclasses.dataclass(frozen=True)
class Plan:
    """Repetitions per measure; the full plan fits in 15 minutes on 2 cores.

    ``fast_reps`` is for the rows whose samples take well under a second (traces,
    init, lazy_init, per-call overheads), where extra repetitions are cheap and a
    median of 7 still moved by ±10 % from run to run (11 keep the full run under 15 minutes).
    """

    reps: int
    fast_reps: int
    import_reps: int
    compile_reps: int
    eager_calls: int
    step_calls: int
    profile_runs: int = 5
    warmup: bool = True


RESULTS = Path(__file__).with_name('RESULTS.md')
OVERHEAD = Path(__file__).with_name('OVERHEAD.md')

FULL_PLAN = Plan(
    reps=7,
    fast_reps=11,
    import_reps=5,
    compile_reps=3,
    eager_calls=200,
    step_calls=50,
    profile_runs=3,
)
# The smoke run only proves the code paths work: no warm-up round, one of everything.
SMOKE_PLAN = Plan(
    reps=1,
    fast_reps=1,
    profile_runs=1,
    import_reps=1,
    compile_reps=1,
    eager_calls=2,
    step_calls=2,
    warmup=False,
)


# Groups of rows `--only` selects (a quick check of the rows a change touches).
GROUPS = (
    'import',
    'trace',
    'calls',
    'init',
    'lazy_init',
    'per_call',
    'hlo',
    'train',
    'compile',
    'reuse',
    'overhead',
)


def run(
    out: Path,
    smoke: bool = False,
    peers: tuple[str, ...] = PEER_NAMES,
    log=print,
    only: tuple[str, ...] = GROUPS,
):
    """Run the measures of the groups in ``only`` (default: all) and write the results.

    Returns the list of rows.
    """
    start = time.perf_counter()
    # JAX's default settings, whatever the environment says (the test suite exports
    # Flax's strict rank promotion): the pure JAX baseline broadcasts its biases by
    # NumPy rules, as JAX users write it.
    jax.config.update('jax_numpy_rank_promotion', 'allow')
    sizes, plan = (SMOKE, SMOKE_PLAN) if smoke else (FULL, FULL_PLAN)
    selected = tuple(p for p in PEERS if p.name in peers or p.name == 'jax')
    out.mkdir(parents=True, exist_ok=True)
    hlo_dir, profile_dir = out / 'hlo', out / 'profiles'
    hlo_dir.mkdir(exist_ok=True)
    profile_dir.mkdir(exist_ok=True)

    def step(what):
        log(f'[{time.perf_counter() - start:6.1f} s] {what}')

    m.WARMUP = plan.warmup
    step('building models')
    bench = build(sizes, selected)
    s = sizes
    mlp = f'{s.mlp_depth}-layer MLP (width {s.mlp_width})'
    tf = f'{s.tf_blocks}-block transformer (width {s.tf_width}, {s.tf_heads} heads, seq {s.tf_seq})'
    tiny = f'tiny MLP (2 layers, width {s.tiny_width}, batch {s.tiny_batch})'
    res = f'{s.res_blocks} residual blocks (width {s.res_width})'
    rows = []

    if 'import' in only:
        step('import')
        rows.append(m.measure_import(bench, plan.import_reps))
    if 'trace' in only:
        step('trace')
        for model, label in (('mlp', mlp), ('transformer', tf)):
            rows.append(m.measure_trace(bench, model, f'trace, {label}', '≤ ×1.10', plan.fast_reps))
    if 'calls' in only:
        step('python calls per trace and per eager apply')
        for model, label in (('mlp', mlp), ('transformer', tf)):
            rows.append(
                m.measure_trace_calls(
                    bench,
                    model,
                    f'Python calls per trace, {label}',
                    profile_dir,
                    target='≤ ×1.05',
                )  # fmt: skip
            )
        rows.append(
            m.measure_trace_calls(
                bench,
                'tiny',
                f'Python calls per eager apply, {tiny}',
                profile_dir,
                eager=True,
                target='≤ ×1.25',
            )  # fmt: skip
        )
    if 'init' in only:
        step('init')
        rows += _init_rows(bench, plan, mlp, tf)
    if 'lazy_init' in only:
        step('lazy_init')
        rows += _lazy_rows(bench, plan, mlp, tf, tiny)
    if 'per_call' in only:
        step('per-call overheads')
        rows += _per_call_rows(bench, plan, tiny)
    if 'hlo' in only:
        step('compiled programs')
        rows += _hlo_rows(bench, plan, mlp, tf, tiny, hlo_dir)
    if 'train' in only:
        step('train step')
        rows += _train_rows(bench, plan, mlp, tf)
    if 'compile' in only:
        step('compile, scanned vs unrolled')
        rows += _compile_rows(bench, plan, res)
    if 'reuse' in only:
        step('trace reuse of repeated blocks')
        rows += _reuse_rows(bench, plan, tf, res)
    if 'overhead' in only and 'linen' in bench.impls:
        step('where linen spends the time pure JAX does not')
        text = _overhead.report(bench, plan.fast_reps, plan.profile_runs, log=log)
        (out / 'overhead.md').write_text(text)
    return _finish(out, rows, selected, bench, smoke, plan, sizes, start, step, log)


def _init_rows(bench, plan, mlp, tf):
    rows = []
    vs_pf = 'vs pure JAX params + forward'
    for model, label in (('mlp', mlp), ('transformer', tf)):
        rows.append(
            m.measure_init_eager(
                bench, model, f'eager init {vs_pf}, {label}', '≤ ×1.00', plan.fast_reps
            )
        )
    for model, label in (('mlp', mlp), ('transformer', tf)):
        rows.append(
            m.measure_init_trace(
                bench, model, f'trace of init {vs_pf}, {label}', '≤ ×1.10', plan.fast_reps
            )
        )
    return rows


def _lazy_rows(bench, plan, mlp, tf, tiny):
    rows = []
    for model, label in (('mlp', mlp), ('transformer', tf)):
        rows.append(
            m.measure_lazy_init(
                bench,
                model,
                f'lazy_init vs pure JAX params only, {label}',
                '≤ ×1.30',
                plan.fast_reps,
            )
        )
    rows.append(
        m.measure_init_jit_first(bench, 'tiny', f'first call of jit(init), {tiny}', plan.reps)
    )
    return rows


def _per_call_rows(bench, plan, tiny):
    return [
        m.measure_apply_eager(
            bench,
            'tiny',
            f'eager apply per call, {tiny}',
            '≤ ×1.30',
            plan.fast_reps,
            plan.eager_calls,
        ),
        m.measure_apply_jit_dispatch(
            bench, 'tiny', f'jitted dispatch per call, {tiny}', plan.fast_reps, plan.eager_calls
        ),
    ]


def _hlo_rows(bench, plan, mlp, tf, tiny, hlo_dir):
    rows = []
    for model, label in (('tiny', tiny), ('mlp', mlp), ('transformer', tf)):
        rows.append(m.measure_hlo(bench, model, f'optimized HLO vs pure JAX, {label}', hlo_dir))
    rows.append(m.measure_step(bench, 'mlp', f'compiled step, {mlp}', plan.reps, plan.step_calls))
    rows.append(
        m.measure_step(bench, 'transformer', f'compiled step, {tf}', plan.reps, plan.step_calls)
    )
    return rows


def _train_rows(bench, plan, mlp, tf):
    rows = []
    for model, label in (('mlp', mlp), ('transformer', tf)):
        rows.append(
            m.measure_train_trace(
                bench, model, f'trace of a train step (grad + Adam), {label}', plan.reps
            )
        )
    for model, label in (('mlp', mlp), ('transformer', tf)):
        rows.append(
            m.measure_train_step(
                bench,
                model,
                f'compiled train step (grad + Adam), {label}',
                plan.reps,
                plan.step_calls,
            )
        )
    return rows


def _compile_rows(bench, plan, res):
    scan = m.measure_compile(bench, 'scan', f'lower + compile, {res} scanned', plan.compile_reps)
    unrolled = m.measure_compile(
        bench, 'unrolled', f'lower + compile, {res} unrolled', plan.compile_reps
    )
    jit = m.measure_jit_instances(
        bench,
        'XLA compiles in the first (and each later) apply of 10 `nn.jit` instances of one class, labels on',
    )
    return [scan, unrolled, m.unrolled_over_scanned(bench, scan, unrolled), jit]


def _reuse_rows(bench, plan, tf, res):
    r = _reuse
    unrolled = f'{res} unrolled'
    models = (('transformer', tf), ('unrolled', unrolled))
    on = '(linen: reuse off; on)'
    rows = []
    for model, label in models:
        target = '≤ ×0.5 with reuse on' if model == 'transformer' else '—'
        rows.append(r.measure_trace(bench, model, f'trace {on}, {label}', target, plan.fast_reps))
    for model, label in models:
        target = '≤ ×0.4 with reuse on' if model == 'unrolled' else '—'
        rows.append(
            r.measure_trace_lower(bench, model, f'trace + lower {on}, {label}', target, plan.reps)
        )
    for model, label in models:
        rows.append(
            r.measure_lower_compile(
                bench, model, f'lower + compile {on}, {label}', '—', plan.compile_reps
            )
        )
    rows.append(
        r.measure_train_trace(
            bench,
            'transformer',
            f'trace of a train step (grad + Adam) {on}, {tf}',
            '≤ ×0.6 with reuse on',
            plan.reps,
        )
    )
    rows.append(
        r.measure_train_first(
            bench,
            'transformer',
            f'trace + lower + compile of a train step {on}, {tf}',
            '≤ ×1.00 with reuse on',
            plan.compile_reps,
        )
    )
    for model, label in models:
        rows.append(r.measure_hlo(bench, model, f'optimized HLO vs pure JAX {on}, {label}'))
    return rows


def _finish(out, rows, selected, bench, smoke, plan, sizes, start, step, log):
    wall = time.perf_counter() - start
    meta = {
        'mode': 'smoke' if smoke else 'full',
        'reps': plan.reps,
        'fast_reps': plan.fast_reps,
        'plan': dataclasses.asdict(plan),
        'sizes': dataclasses.asdict(sizes),
        'environment': environment(),
        'wall_s': wall,
        'unavailable': {f'{p}/{mod or "*"}': r for (p, mod), r in bench.unavailable.items()},
    }
    table = write(out, rows, selected, meta)
    step(f'wrote {out}/results.md, results.json, ratios.png')
    log(table)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', type=Path, default=Path('bench-out'), help='output folder')
    parser.add_argument('--smoke', action='store_true', help='tiny sizes, one repetition')
    parser.add_argument(
        '--peers',
        default=','.join(PEER_NAMES),
        help='comma list of columns (pure JAX is always measured)',
    )
    parser.add_argument(
        '--only',
        default=','.join(GROUPS),
        help=f'comma list of row groups to run ({", ".join(GROUPS)}); default: all',
    )
    parser.add_argument(
        '--publish',
        action='store_true',
        help='also copy the table to benchmarks/RESULTS.md (full runs only)',
    )
    args = parser.parse_args(argv)
    if args.publish and args.smoke:
        parser.error('--publish is for full runs: a smoke table says nothing about speed')
    only = tuple(args.only.split(','))
    if unknown := set(only) - set(GROUPS):
        parser.error(f'--only: unknown groups {sorted(unknown)}; known: {", ".join(GROUPS)}')
    if args.publish and set(only) != set(GROUPS):
        parser.error('--publish needs every row: drop --only')
    run(args.out, smoke=args.smoke, peers=tuple(args.peers.split(',')), only=only)
    if args.publish:
        RESULTS.write_text((args.out / 'results.md').read_text())
        OVERHEAD.write_text((args.out / 'overhead.md').read_text())


if __name__ == '__main__':
    main()
