"""Helpers of the cross-distribution tests: installing fixture packages and probing
fresh interpreters.

Anything that changes which plugins are installed runs in a subprocess: the plugin
manager of this process loads its entry points once, and the other tests depend
on that set staying as it is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / 'fixtures'
PACKAGES = ROOT / 'packages'


def find_uv() -> str | None:
    """The uv binary: on PATH, beside this interpreter, or from the ``uv`` package."""
    candidates = [shutil.which('uv'), str(Path(sys.executable).parent / 'uv')]
    if importlib.util.find_spec('uv') is not None:
        import uv

        candidates.append(uv.find_uv_bin())
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def pip_install_command(python: str) -> list[str]:
    """``uv pip install`` for ``python`` when uv exists (fast, cached), else pip."""
    uv = find_uv()
    if uv is not None:
        return [uv, 'pip', 'install', '--quiet', '--python', python]
    return [python, '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check']


def run_checked(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise AssertionError(
            f'command failed ({result.returncode}): {" ".join(cmd)}\n'
            f'--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}'
        )
    return result


@pytest.fixture(scope='session')
def plugin_site(tmp_path_factory):
    """``plugin_site(name)``: a directory holding fixture package ``name`` installed by pip.

    ``pip install --target`` writes the package and its ``.dist-info`` (with
    ``entry_points.txt``); a subprocess that has the directory on ``PYTHONPATH``
    discovers the entry point through ``importlib.metadata`` exactly as it would
    for a package installed into site-packages.
    """
    sites: dict[str, Path] = {}

    def install(name: str) -> Path:
        if name not in sites:
            if importlib.util.find_spec('hatchling') is None:
                pytest.skip('hatchling is needed to build the fixture packages')
            target = tmp_path_factory.mktemp(f'site-{name}')
            run_checked(
                pip_install_command(sys.executable)
                + ['--no-deps', '--no-build-isolation', '--target', str(target)]
                + [str(FIXTURES / name)]
            )
            sites[name] = target
        return sites[name]

    return install


def facade_available() -> bool:
    return importlib.util.find_spec('linen.nn') is not None


def module_available() -> bool:
    import linen.module

    return hasattr(linen.module, 'Module') and hasattr(linen.module, 'compact')


@pytest.fixture
def probe():
    """``probe(code, sites=..., env=...)``: run code in a fresh interpreter, return its JSON."""
    return run_probe


@pytest.fixture
def needs_facade():
    # Every test environment has the facade: its absence is a failure, never a skip.
    assert facade_available(), 'linen.nn (the facade of linen-core) is not importable'


@pytest.fixture
def needs_module(needs_facade):
    assert module_available(), 'linen.module has no Module/compact'


def run_probe(
    code: str, *, sites=(), env: dict[str, str] | None = None, python=None, cwd=None
) -> dict:
    """Run ``code`` in a fresh interpreter; it must print one JSON object as its last line.

    ``sites`` go on ``PYTHONPATH``. ``LINEN_DISABLE_PLUGINS`` is cleared unless
    ``env`` sets it, so the caller's environment does not leak in.
    """
    full_env = dict(os.environ)
    full_env.pop('LINEN_DISABLE_PLUGINS', None)
    paths = [str(s) for s in sites]
    if full_env.get('PYTHONPATH'):
        paths.append(full_env['PYTHONPATH'])
    full_env['PYTHONPATH'] = os.pathsep.join(paths)
    full_env['JAX_PLATFORMS'] = 'cpu'
    full_env.update(env or {})
    result = run_checked(
        [python or sys.executable, '-c', textwrap.dedent(code)], env=full_env, cwd=cwd or ROOT
    )
    lines = result.stdout.strip().splitlines()
    assert lines, f'probe printed nothing; stderr:\n{result.stderr}'
    return json.loads(lines[-1])


@pytest.fixture(scope='session')
def tools():
    """The helpers above, for test modules (which cannot import conftest by name)."""
    return SimpleNamespace(
        root=ROOT,
        packages=PACKAGES,
        find_uv=find_uv,
        pip_install_command=pip_install_command,
        run_checked=run_checked,
        run_probe=run_probe,
    )
