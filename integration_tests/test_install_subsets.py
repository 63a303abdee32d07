"""Installs of a subset of the distributions, from built wheels, into a fresh venv.

One venv serves both checks: first it holds only the ``linen-core`` wheel (and its
dependencies from the index), then the ``linen-module`` wheel is added. The venv
does not see this environment's site-packages, so an accidental import of a
sibling distribution fails here. JAX is pinned to the version running these tests
so that uv answers from its cache.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FACADE_CHECK = """
import json
import linen.core
import linen.nn as nn

def attribute_error(name):
    try:
        getattr(nn, name)
    except AttributeError as exc:
        return str(exc)
    return None

result = {'core_version': linen.core.__version__, 'dense_error': attribute_error('Dense')}
try:
    import linen.module
    result['module_installed'] = True
    result['has_module_class'] = hasattr(linen.module, 'Module')
except ImportError:
    result['module_installed'] = False
if result['module_installed'] and result['has_module_class']:
    module_cls = nn.Module
    result['nn_module_is_module'] = module_cls is linen.module.Module
print(json.dumps(result))
"""


def _build_wheel(tools, dist: str, outdir: Path) -> Path:
    if importlib.util.find_spec('build') is None or importlib.util.find_spec('hatchling') is None:
        pytest.skip('building wheels needs the "build" and "hatchling" packages')
    tools.run_checked(
        [sys.executable, '-m', 'build', '--wheel', '--no-isolation', '--outdir', str(outdir)]
        + [str(tools.packages / dist)]
    )
    (wheel,) = outdir.glob(f'{dist.replace("-", "_")}-*.whl')
    return wheel


def _fresh_venv(tools, path: Path) -> str:
    uv = tools.find_uv()
    if uv is not None:
        tools.run_checked([uv, 'venv', '--quiet', '--python', sys.executable, str(path)])
    else:
        subprocess.run([sys.executable, '-m', 'venv', str(path)], check=True)
    python = path / ('Scripts/python.exe' if sys.platform == 'win32' else 'bin/python')
    return str(python)


@pytest.fixture(scope='module')
def subset_env(tools, tmp_path_factory):
    root = tmp_path_factory.mktemp('subset')
    wheels = root / 'wheels'
    core_wheel = _build_wheel(tools, 'linen-core', wheels)
    module_wheel = _build_wheel(tools, 'linen-module', wheels)
    python = _fresh_venv(tools, root / 'venv')
    jax_version = importlib.metadata.version('jax')
    jaxlib_version = importlib.metadata.version('jaxlib')
    tools.run_checked(
        tools.pip_install_command(python)
        + [str(core_wheel), f'jax=={jax_version}', f'jaxlib=={jaxlib_version}']
    )
    return {'python': python, 'module_wheel': module_wheel, 'cwd': root, 'tools': tools}


def _check(env) -> dict:
    # cwd outside the repository: nothing from the source tree is importable.
    return env['tools'].run_probe(FACADE_CHECK, python=env['python'], cwd=env['cwd'])


def _assert_layers_hint(message: str | None) -> None:
    assert message is not None, 'nn.Dense did not raise AttributeError without linen-layers'
    assert 'linen-layers' in message
    assert 'pip install "linen-core[layers]"' in message


def test_core_only_then_core_and_module(subset_env):
    core_only = _check(subset_env)
    assert core_only['module_installed'] is False
    _assert_layers_hint(core_only['dense_error'])

    # Add linen-module; its only dependency, linen-core, is already there.
    subset_env['tools'].run_checked(
        subset_env['tools'].pip_install_command(subset_env['python'])
        + ['--no-deps', str(subset_env['module_wheel'])]
    )
    with_module = _check(subset_env)
    assert with_module['module_installed'] is True
    assert with_module['core_version'] == core_only['core_version']
    _assert_layers_hint(with_module['dense_error'])
    assert with_module['has_module_class'] is True
    assert with_module['nn_module_is_module'] is True
