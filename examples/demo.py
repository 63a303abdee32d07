"""Train a small CNN on scikit-learn's 8x8 digits with linen, end to end.

Run it with ``python3 -m nox -s demo`` (the session installs what it needs), or
directly with ``python examples/demo.py --help``. The model, the training loop and
the reports are in ``examples/digits_cnn.py``; this file is the command line: it
parses the options, checks that every package the demo needs is installed (the
list is ``examples/requirements.txt``) and names all the missing ones at once,
clears the previous run's outputs from ``--out``, and only then imports JAX and
starts. See docs/guides/examples.md for what it writes.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / 'requirements.txt'
# linen itself and JAX, which examples/requirements.txt leaves to the workspace.
WORKSPACE = (
    'jax',
    'linen-core',
    'linen-module',
    'linen-transforms',
    'linen-layers',
    'linen-profiling',
)

# Every file and folder a run may write under --out. A run removes them first, so
# that what the folder holds afterwards is that run's output alone (--no-profile
# writes fewer of them).
OUTPUTS = (
    'metrics.json',
    'checkpoint',
    'curves.png',
    'costs.txt',
    'summary.txt',
    'times.txt',
    'trace',
    'report.txt',
    'report.json',
    'flame.png',
    'flame.html',
    'perfetto.json',
)


def requirements(path: Path | None = None) -> list[str]:
    """The distribution names listed in ``path`` (default: ``REQUIREMENTS``), no versions."""
    names = []
    for line in (path or REQUIREMENTS).read_text(encoding='utf-8').splitlines():
        match = re.match(r'\s*([A-Za-z0-9][A-Za-z0-9._-]*)', line.split('#', 1)[0])
        if match:
            names.append(match.group(1))
    return names


def missing_distributions(names) -> list[str]:
    """Those of ``names`` that are not installed (looked up without importing them)."""
    missing = []
    for name in names:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def check_installed() -> None:
    """Exit naming every missing package, before anything slow happens."""
    extras = missing_distributions(requirements())
    workspace = missing_distributions(WORKSPACE)
    if not (extras or workspace):
        return
    lines = ['examples/demo.py cannot start: these packages are not installed:']
    if extras:
        lines.append(f'  {", ".join(extras)}: python3 -m pip install -r {REQUIREMENTS}')
    if workspace:
        lines.append(
            f'  {", ".join(workspace)}: python3 -m pip install {HERE.parent / "packages"}/* '
            '(from the checkout; see docs/installing.md)'
        )
    lines.append('Or run `python3 -m nox -s demo`, which installs all of them.')
    raise SystemExit('\n'.join(lines))


def clear_outputs(out: Path) -> None:
    """Remove what an earlier run wrote under ``out``; leave anything else there alone."""
    for name in OUTPUTS:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Train a small CNN (Conv + BatchNorm + Dropout, nn.remat blocks) on scikit-learn's "
            '8x8 digits with linen and optax; checkpoint with orbax halfway, restore, resume; '
            'then print held-out accuracy, per-module cost and time tables, the joined '
            'profiling report, a summary table, and write PNGs of the training curves and '
            'of a flame graph, and a Perfetto trace. Every output goes under --out.'
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument('--epochs', type=int, default=15, help='training epochs (>= 1)')
    parser.add_argument(
        '--batch-size', type=int, default=32, help='examples per optimizer step (1..1437)'
    )
    parser.add_argument(
        '--out', type=Path, default=Path('demo-out'), help='folder for every output file'
    )
    parser.add_argument(
        '--profile',
        action=argparse.BooleanOptionalAction,
        default=True,
        help='record a jax.profiler trace of the train step; print time per module and the '
        'joined report (FLOPs forward/backward/recompute, time, memory, trace time), write '
        'the flame graph (PNG, HTML) and a Perfetto trace (--no-profile skips all of it; the '
        'FLOPs table and the summary are made either way, without running)',
    )
    parser.add_argument('--learning-rate', type=float, default=2e-3, help='Adam learning rate')
    parser.add_argument('--seed', type=int, default=0, help='seed of the split, init and shuffling')
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error('--epochs must be at least 1')
    if not 1 <= args.batch_size <= 1437:
        parser.error('--batch-size must be between 1 and 1437 (the training examples)')
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    check_installed()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    clear_outputs(out)
    # Imported only now: --help and a missing package answer without loading JAX.
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import digits_cnn

    return digits_cnn.run(args, out)


if __name__ == '__main__':
    main()
