"""``python -m integration_tests.fuzz`` (what ``nox -s fuzz`` runs).

    --programs N | --minutes M   how long the differential run lasts (default 200 programs)
    --seed S                     which programs (program i of seed S is always the same)
    --out DIR                    where new reproducers go (default: reproducers/ here)
    --no-shrink                  record differences unshrunk (faster, bigger reproducers)
    --no-compile-cache           compile every program anew (see _share_compilations)
    --checkpoints N              instead: N random and mutated checkpoints (checkpoints.py)
    --plugin-sets N              instead: N random plugin sets (plugin_sets.py)

Exit status 1 when a difference that is not a known finding showed up.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from integration_tests.fuzz.reproduce import REPRODUCERS


class _Bar:
    """A progress bar: rich's when it is installed, a plain line otherwise."""

    def __init__(self, total: float | None, unit: str):
        self.total, self.unit, self.start = total, unit, time.monotonic()
        self.rich = None
        try:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        except ImportError:
            return
        if sys.stderr.isatty():  # in a log file, plain lines, one per update
            self.rich = Progress(
                TextColumn('[bold]{task.description}'), BarColumn(),
                TextColumn('{task.completed:.0f}/{task.total:.0f}'), TimeElapsedColumn(),
                TextColumn('{task.fields[status]}'),
            )  # fmt: skip
            self.task = self.rich.add_task(unit, total=total, status='')
            self.rich.start()

    def update(self, done: float, status: str) -> None:
        if self.rich is not None:
            self.rich.update(self.task, completed=done, status=status)
        else:
            total = f'/{self.total:.0f}' if self.total else ''
            print(f'{self.unit} {done:.0f}{total} {status}', file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.rich is not None:
            self.rich.stop()


def _share_compilations(folder: str) -> None:
    """JAX's persistent compilation cache, in a folder that lives as long as the run.

    Compiling is two thirds of a program's CPU time, and much of it compiles the same
    HLO again: Flax's and linen's stages often lower to the same computation, ``bind``
    repeats ``apply``'s eager loops, and small subprograms recur from program to
    program. The cache key is the HLO without its metadata, so a hit hands back an
    executable of the same computation: values compare as before. Set before the
    first compilation (the cache is chosen then), never in the test suite (whose
    profiling tests read the op metadata of what they compiled).
    """
    import jax

    jax.config.update('jax_compilation_cache_dir', folder)
    jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)
    jax.config.update('jax_persistent_cache_min_entry_size_bytes', -1)


def _programs(args) -> int:
    if args.no_compile_cache:
        return _run_programs(args)
    with tempfile.TemporaryDirectory(prefix='linen-fuzz-xla-') as folder:
        _share_compilations(folder)
        return _run_programs(args)


def _run_programs(args) -> int:
    from integration_tests.fuzz import campaign

    minutes = args.minutes
    total = None if minutes is not None else args.programs
    bar = _Bar(minutes * 60 if minutes is not None else total, 'programs')
    start = time.monotonic()

    def progress(index: int, report) -> None:
        done = time.monotonic() - start if minutes is not None else index
        status = f'{index} run, {len(report.new)} new, known {sum(report.known.values())}'
        bar.update(done, status)

    try:
        report = campaign.run(
            args.seed, total, minutes, not args.no_shrink, Path(args.out), progress
        )
    finally:
        bar.close()
    print(report.summary())
    for found in report.new:
        where = f' -> {found.reproducer}' if found.reproducer else ''
        print(f'program {found.index}: {found.diff}{where}')
    return 1 if report.new else 0


def _checkpoints(args) -> int:
    from integration_tests.fuzz import checkpoints

    bar = _Bar(args.checkpoints, 'checkpoints')
    report = checkpoints.run(args.seed, args.checkpoints, lambda i, r: bar.update(i, r.status()))
    bar.close()
    print(report.summary())
    return 1 if report.failures else 0


def _plugin_sets(args) -> int:
    from integration_tests.fuzz import plugin_sets

    bar = _Bar(args.plugin_sets, 'plugin sets')
    report = plugin_sets.run(args.seed, args.plugin_sets, lambda i, r: bar.update(i, r.status()))
    bar.close()
    print(report.summary())
    return 1 if report.failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m integration_tests.fuzz', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    how_long = parser.add_mutually_exclusive_group()
    how_long.add_argument('--programs', type=int, default=200)
    how_long.add_argument('--minutes', type=float)
    how_long.add_argument('--checkpoints', type=int, metavar='N')
    how_long.add_argument('--plugin-sets', type=int, metavar='N')
    parser.add_argument('--seed', default='0')
    parser.add_argument('--out', default=str(REPRODUCERS))
    parser.add_argument('--no-shrink', action='store_true')
    parser.add_argument('--no-compile-cache', action='store_true')
    args = parser.parse_args(argv)
    if args.checkpoints is not None:
        return _checkpoints(args)
    if args.plugin_sets is not None:
        return _plugin_sets(args)
    return _programs(args)


__all__ = ['main']
