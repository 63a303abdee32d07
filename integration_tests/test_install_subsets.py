"""Installs as the README documents them, each into a fresh venv, and the hints they lead to.

Three situations, three venvs that do not see this environment's site-packages (an
accidental import of a sibling distribution fails here):

- **built wheels in a folder** (what ``nox -s build`` leaves in ``dist/``): ``linen-core``
  alone, then ``linen-module`` added, then the command the missing-name hint
  prints, then the README's ``--find-links dist "linen-core[all]"``;
- **one wheel file** installed by path: the hint names the folder it came from;
- **a checkout**: ``linen-core`` from ``packages/``, the hint's command (the sibling
  folders, since no index has them), then the README's ``./packages/*``.

Every printed command is run as printed (``pip install`` ARGS, through uv when it
exists). JAX is pinned to the version running these tests so that uv answers from
its cache.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = [
    'linen-core',
    'linen-module',
    'linen-transforms',
    'linen-layers',
    'linen-profiling',
]

# The commands the README and Getting started give, verbatim (the tests run them).
FROM_CHECKOUT = 'python3 -m pip install ./packages/*'
BUILD_WHEELS = 'python3 -m nox -s build'
FROM_WHEELS = 'python3 -m pip install --find-links dist "linen-core[all]"'

FACADE_CHECK = f"""
DISTRIBUTIONS = {DISTRIBUTIONS!r}
import json
from importlib import metadata
import linen.core
import linen.nn as nn

def attribute_error(name):
    try:
        getattr(nn, name)
    except AttributeError as exc:
        return str(exc)
    return None

installed = []
for dist in DISTRIBUTIONS:
    try:
        metadata.version(dist)
        installed.append(dist)
    except metadata.PackageNotFoundError:
        pass
result = {{'core_version': linen.core.__version__, 'dense_error': attribute_error('Dense'),
          'installed': installed}}
try:
    import linen.module
    result['nn_module_is_module'] = nn.Module is linen.module.Module
except ImportError:
    result['nn_module_is_module'] = None
print(json.dumps(result))
"""


def test_readme_and_getting_started_give_the_tested_commands():
    for page in (ROOT / 'README.md', ROOT / 'docs' / 'getting-started.md'):
        text = page.read_text(encoding='utf-8')
        for command in (FROM_CHECKOUT, BUILD_WHEELS, FROM_WHEELS):
            assert command in text, (page.name, command)
    installing = (ROOT / 'docs' / 'installing.md').read_text(encoding='utf-8')
    assert FROM_CHECKOUT in installing and FROM_WHEELS in installing


@pytest.fixture(scope='module')
def wheels(tools, tmp_path_factory) -> Path:
    """Every distribution's wheel in one folder, as ``nox -s build`` leaves them."""
    if importlib.util.find_spec('build') is None or importlib.util.find_spec('hatchling') is None:
        pytest.fail('building wheels needs the "build" and "hatchling" packages (TEST_DEPS)')
    outdir = tmp_path_factory.mktemp('dist')
    for dist in DISTRIBUTIONS:
        tools.run_checked(
            [sys.executable, '-m', 'build', '--wheel', '--no-isolation', '--outdir', str(outdir)]
            + [str(tools.packages / dist)]
        )
    assert len(list(outdir.glob('linen_*.whl'))) == len(DISTRIBUTIONS)
    return outdir


def _fresh_venv(tools, path: Path) -> str:
    uv = tools.find_uv()
    if uv is not None:
        tools.run_checked([uv, 'venv', '--quiet', '--python', sys.executable, str(path)])
    else:
        subprocess.run([sys.executable, '-m', 'venv', str(path)], check=True)
    return str(path / ('Scripts/python.exe' if sys.platform == 'win32' else 'bin/python'))


def _pins() -> list[str]:
    return [
        f'jax=={importlib.metadata.version("jax")}',
        f'jaxlib=={importlib.metadata.version("jaxlib")}',
    ]


def _pip_install(tools, python: str, args: list[str], cwd: Path) -> None:
    tools.run_checked(tools.pip_install_command(python) + args + _pins(), cwd=cwd)


def _run_documented(tools, python: str, command: str, cwd: Path) -> None:
    """Run ``[python3 -m] pip install ARGS`` as a shell would (``*`` expanded in ``cwd``)."""
    words = shlex.split(command)
    if words[:3] == ['python3', '-m', 'pip']:
        words = words[2:]
    assert words[:2] == ['pip', 'install'], command
    args: list[str] = []
    for word in words[2:]:
        args += sorted(str(p) for p in cwd.glob(word)) if '*' in word else [word]
    _pip_install(tools, python, args, cwd)


def _check(tools, python: str, cwd: Path) -> dict:
    # cwd outside the repository: nothing from the source tree is importable.
    return tools.run_probe(FACADE_CHECK, python=python, cwd=cwd)


def _hinted_command(message: str | None) -> str:
    assert message is not None, 'nn.Dense did not raise AttributeError without linen-layers'
    assert 'linen-layers' in message, message
    return message.split('Install it with: ', 1)[1]


def test_wheels_folder_core_then_module_then_hint_then_all(tools, wheels, tmp_path):
    python = _fresh_venv(tools, tmp_path / 'venv')
    _pip_install(tools, python, ['--find-links', str(wheels), 'linen-core'], tmp_path)
    core_only = _check(tools, python, tmp_path)
    assert core_only['installed'] == ['linen-core']
    assert core_only['nn_module_is_module'] is None
    # Installed by name from a folder, as from an index: nothing records which, so the
    # hint gives the index command and says what to add for built wheels.
    hint = _hinted_command(core_only['dense_error'])
    assert hint.startswith('pip install "linen-core[layers]" (from built wheels: add --find-links')

    # Add linen-module; its only dependency, linen-core, is already there.
    _pip_install(tools, python, ['--no-deps', *wheels.glob('linen_module-*.whl')], tmp_path)
    with_module = _check(tools, python, tmp_path)
    assert with_module['installed'] == ['linen-core', 'linen-module']
    assert with_module['core_version'] == core_only['core_version']
    assert with_module['nn_module_is_module'] is True
    _hinted_command(with_module['dense_error'])

    # The hint's command, with the folder it says to add, brings the layers.
    command = hint.split(' (', 1)[0].replace('install', f'install --find-links {wheels}', 1)
    _run_documented(tools, python, command, tmp_path)
    with_layers = _check(tools, python, tmp_path)
    assert with_layers['dense_error'] is None
    assert 'linen-profiling' not in with_layers['installed']

    # The README's command (dist/ is where `nox -s build` writes; here, the test's folder).
    (tmp_path / 'dist').symlink_to(wheels, target_is_directory=True)
    _run_documented(tools, python, FROM_WHEELS, tmp_path)
    assert _check(tools, python, tmp_path)['installed'] == DISTRIBUTIONS


def test_wheel_file_hint_names_its_folder(tools, wheels, tmp_path):
    python = _fresh_venv(tools, tmp_path / 'venv')
    (core_wheel,) = wheels.glob('linen_core-*.whl')
    _pip_install(tools, python, [str(core_wheel)], tmp_path)
    hint = _hinted_command(_check(tools, python, tmp_path)['dense_error'])
    assert hint == f'pip install --find-links {wheels} "linen-core[layers]"'
    _run_documented(tools, python, hint, tmp_path)
    after = _check(tools, python, tmp_path)
    assert after['dense_error'] is None
    assert after['installed'] == ['linen-core', 'linen-module', 'linen-transforms', 'linen-layers']


def test_checkout_core_then_hint_then_every_folder(tools, tmp_path):
    python = _fresh_venv(tools, tmp_path / 'venv')
    # What failed before: the extra names siblings that no index has.
    _pip_install(tools, python, ['./packages/linen-core'], ROOT)
    hint = _hinted_command(_check(tools, python, tmp_path)['dense_error'])
    # The folder of linen-layers and of the siblings it needs that are missing.
    folders = [ROOT / 'packages' / d for d in ('linen-layers', 'linen-module', 'linen-transforms')]
    assert hint == 'pip install ' + ' '.join(str(f) for f in folders)
    _run_documented(tools, python, hint, tmp_path)
    after = _check(tools, python, tmp_path)
    assert after['dense_error'] is None and after['nn_module_is_module'] is True
    assert 'linen-profiling' not in after['installed']

    _run_documented(tools, python, FROM_CHECKOUT, ROOT)
    assert _check(tools, python, tmp_path)['installed'] == DISTRIBUTIONS


@pytest.mark.parametrize(
    ('origin', 'expected'),
    [
        # This checkout, editable: the folder, with -e (its siblings are installed here).
        ((ROOT / 'packages' / 'linen-core', True), f'pip install -e {ROOT}/packages/linen-layers'),
        ((ROOT / 'packages' / 'linen-core', False), f'pip install {ROOT}/packages/linen-layers'),
        (
            (Path('/wheels/linen_core-0.1.0-py3-none-any.whl'), False),
            'pip install --find-links /wheels "linen-core[layers]"',
        ),
        # A folder that is no checkout any more: the extra, as from an index.
        ((Path('/gone/packages/linen-core'), False), 'pip install "linen-core[layers]"'),
    ],
)
def test_install_command_per_origin(monkeypatch, origin, expected):
    from linen.nn import _hints

    monkeypatch.setattr(_hints, '_origin_of_core', lambda: origin)
    assert _hints.install_command('linen-layers') == expected


def test_install_command_without_a_record_names_the_index_and_find_links(monkeypatch):
    from linen.nn import _hints

    monkeypatch.setattr(_hints, '_origin_of_core', lambda: None)
    command = _hints.install_command('linen-profiling')
    assert command.startswith('pip install "linen-core[profiling]" (from built wheels: add')
    assert '--find-links' in command
