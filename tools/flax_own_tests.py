"""Run Flax's own ``tests/linen`` and ``tests/core`` against linen, unmodified.

Flax's tests are the widest description of Flax Linen's public behaviour there is.
This script fetches them from the Flax source distribution on the package index
(nothing of Flax's is kept in this repository), aliases ``flax.linen``,
``flax.core``, ``flax.errors``, ``flax.struct``, ... to linen in a ``conftest.py``
written beside them, and runs them with pytest under Flax's CI conditions. What it
prints is the figure quoted in the issues: how many of Flax's tests pass on linen.

    python tools/flax_own_tests.py                     # every test, a summary
    python tools/flax_own_tests.py -- -k scan -x       # pytest arguments after --
    python tools/flax_own_tests.py --keep DIR          # leave the tests in DIR
    python tools/flax_own_tests.py --flax-version 0.12.8  # that release's tests

By default the tests are those of the Flax the installed JAX gets (0.12.8 on JAX 0.10,
0.12.12 from JAX 0.11.1 on), so each end of the supported range is held to its Flax.

Needs the development environment (every distribution, Flax, pytest, absl-py) and
the package index (``pip download``). Tests that reach into Flax's private helpers
(``_get_module_table``, ``SetupState``, ...) fail by construction; the summary counts
them like any other failure. ``flax.core.nn`` (Flax's functional layers, used by its
core design tests) stays Flax's own, running on linen's ``Scope``.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

# Whose tests run by default: those of the Flax the installed JAX gets. Flax 0.12.9 and
# later need JAX >= 0.11.1 (their wheels say so), and their rules differ from 0.12.8's
# where Flax changed them (`lazy_init` on an abstract input's value); 0.12.8 is what JAX
# 0.10 resolves to. `--flax-version` runs another release's tests.
FLAX_FOR_OLD_JAX = '0.12.8'
FLAX_FOR_NEW_JAX = '0.12.12'
NEW_JAX = (0, 11, 1)
SUITES = ('tests/linen', 'tests/core')

CONFTEST = '''\
"""Written by tools/flax_own_tests.py: Flax's tests see linen under Flax's names."""
import os
import sys

os.environ.setdefault('JAX_NUMPY_RANK_PROMOTION', 'raise')
os.environ.setdefault('XLA_FLAGS', '--xla_force_host_platform_device_count=4')

import flax
import flax.core.nn as flax_core_nn
import flax.linen.transforms as flax_transforms
import linen.core as core
import linen.nn as nn
import linen.transforms as transforms
from linen.transforms import lift


def alias(name, module):
    sys.modules[name] = module
    parent, _, child = name.rpartition('.')
    setattr(sys.modules[parent], child, module)


alias('flax.linen', nn)
for sub in ('activation', 'attention', 'batch_apply', 'combinators', 'dtypes', 'fp8_ops',
            'initializers', 'kw_only_dataclasses', 'linear', 'module', 'normalization',
            'partitioning', 'pooling', 'recurrent', 'spmd', 'stochastic', 'summary',
            'transforms'):
    alias(f'flax.linen.{sub}', getattr(nn, sub))
alias('flax.core', core)
for sub in ('frozen_dict', 'meta', 'scope', 'spmd'):
    alias(f'flax.core.{sub}', getattr(core, sub))
core.nn = flax_core_nn
alias('flax.core.nn', flax_core_nn)
core.lift = lift
alias('flax.core.lift', lift)
# A private helper one of Flax's transform tests imports at module level: Flax's
# own, so that the rest of that file runs.
if not hasattr(transforms, '_HashableProxy'):
    transforms._HashableProxy = flax_transforms._HashableProxy
alias('flax.errors', core.errors)
alias('flax.struct', core.struct)
alias('flax.serialization', core.serialization)
alias('flax.traverse_util', core.traverse_util)
alias('flax.config', core.config)
'''


def _pip() -> list[str]:
    # A uv-made environment has no pip of its own: the machine's pip downloads as well.
    if importlib.util.find_spec('pip') is not None:
        return [sys.executable, '-m', 'pip']
    found = shutil.which('pip3') or shutil.which('pip')
    if found is None:
        raise SystemExit('flax_own_tests: no pip here to download the Flax source distribution')
    return [found]


def fetch(into: Path, version: str) -> Path:
    subprocess.run(
        [*_pip(), 'download', '-q', '--no-deps', '--no-binary', ':all:',
         f'flax=={version}', '-d', str(into)],
        check=True,
    )  # fmt: skip
    (archive,) = into.glob('flax-*.tar.gz')
    root = f'flax-{version}/'
    with tarfile.open(archive) as tar:
        members = [
            m for m in tar.getmembers() if m.name.startswith(tuple(root + s for s in SUITES))
        ]
        tar.extractall(into, members=members, filter='data')
    return into / f'flax-{version}' / 'tests'


def default_flax_version() -> str:
    """The Flax whose tests match the installed JAX (see ``FLAX_FOR_NEW_JAX``)."""
    release = tuple(int(part) for part in re.findall(r'\d+', metadata.version('jax'))[:3])
    return FLAX_FOR_NEW_JAX if release >= NEW_JAX else FLAX_FOR_OLD_JAX


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--flax-version', default=None, help='default: per the installed JAX')
    parser.add_argument('--keep', type=Path, help='fetch into this folder and leave it there')
    parser.add_argument('pytest_args', nargs='*', help='passed to pytest (after --)')
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        tests = fetch(where, args.flax_version or default_flax_version())
        (tests / 'conftest.py').write_text(CONFTEST)
        command = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-rf',
                   '--tb=line', *(args.pytest_args or ['linen', 'core'])]  # fmt: skip
        return subprocess.run(command, cwd=tests).returncode


if __name__ == '__main__':
    sys.exit(main())
