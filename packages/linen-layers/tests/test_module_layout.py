"""The package's layout rule: public modules are surfaces, private modules implement.

A public module (no leading underscore) re-exports names under the path Flax code
imports them by (``nn.linear.Dense``, ``nn.dtypes.promote_dtype``); the code lives in
a private module. The wheel ships the package without the test harness.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import linen.layers

PACKAGE_DIR = Path(linen.layers.__file__).resolve().parent
DISTRIBUTION_DIR = PACKAGE_DIR.parents[2]

# Public modules that define what they export, and why.
IMPLEMENTING_PUBLIC_MODULES = {
    # Error classes keep their public module as __module__: that is the path users
    # catch and pickles restore from.
    'errors': 'typed errors are defined where users import them',
    # Not split yet (the logical-partitioning helpers and their Module wrappers).
    'partitioning': 'holds its implementation',
}


def _public_modules() -> list[str]:
    return sorted(
        p.stem
        for p in PACKAGE_DIR.glob('*.py')
        if not p.stem.startswith('_') and p.stem not in IMPLEMENTING_PUBLIC_MODULES
    )


@pytest.mark.parametrize('name', _public_modules())
def test_public_module_only_re_exports(name):
    module = importlib.import_module(f'linen.layers.{name}')
    assert module.__all__, name
    defined_here = [
        attr
        for attr in module.__all__
        if (inspect.isclass(obj := getattr(module, attr)) or inspect.isfunction(obj))
        and obj.__module__ == module.__name__
    ]
    assert not defined_here, (
        f'linen.layers.{name} defines {defined_here}: move them to a private module '
        'and re-export them here.'
    )


def test_every_public_module_is_classified():
    # A new public module either follows the rule or is named above with a reason.
    for name in IMPLEMENTING_PUBLIC_MODULES:
        assert (PACKAGE_DIR / f'{name}.py').is_file(), name


def test_wheel_ships_the_package_without_the_test_harness(tmp_path):
    pytest.importorskip('build')
    subprocess.run(
        [sys.executable, '-m', 'build', '--wheel', '--no-isolation', '--outdir', str(tmp_path)],
        cwd=DISTRIBUTION_DIR,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob('linen_layers-*.whl')
    names = set(zipfile.ZipFile(wheel).namelist())
    assert 'linen/layers/_testing.py' not in names
    for source in PACKAGE_DIR.glob('*.py'):
        if source.name != '_testing.py':
            assert f'linen/layers/{source.name}' in names, source.name
