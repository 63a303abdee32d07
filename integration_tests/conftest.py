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
import tempfile
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Test modules import shared helpers as `integration_tests.<module>` (oracle.py).
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
FIXTURES = Path(__file__).resolve().parent / 'fixtures'
PACKAGES = ROOT / 'packages'

# ------------------------------------------------------------ shared compilations
# The differential tests compile each program twice, once from Flax and once from
# linen, to the same HLO but for its op metadata (the module labels); eager runs
# compile every primitive, and the two pytest-xdist workers compile the same ones
# again. JAX's persistent compilation cache keys a program without its metadata, so
# with it a program is compiled once per run: the tests that compare values opt in
# (`pytest.mark.usefixtures('shared_compilations')`; the time saved is in the issue
# notes of the change that added it). A test that reads labels or
# counts compilations from what it compiled must not: a hit hands back an executable
# compiled under another program's labels (linen-profiling warns of that).
COMPILATION_CACHE_ENV = 'LINEN_TEST_COMPILATION_CACHE'
_CACHE_FOLDER = pytest.StashKey[str]()
# Every program cached, however small (a subprocess gets these as JAX's environment
# variables: the names upper-cased).
COMPILATION_CACHE_SETTINGS = {
    'jax_persistent_cache_min_compile_time_secs': 0,
    'jax_persistent_cache_min_entry_size_bytes': -1,
}


def pytest_configure(config):
    # One folder for the run, made before pytest-xdist starts its workers (they
    # inherit the environment); removed when the run ends.
    if COMPILATION_CACHE_ENV not in os.environ and not hasattr(config, 'workerinput'):
        folder = tempfile.mkdtemp(prefix='linen-test-xla-cache-')
        os.environ[COMPILATION_CACHE_ENV] = folder
        config.stash[_CACHE_FOLDER] = folder


def pytest_unconfigure(config):
    folder = config.stash.get(_CACHE_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(COMPILATION_CACHE_ENV, None)


def compilation_cache_env() -> dict[str, str]:
    """The environment that points a subprocess's JAX at the run's shared cache."""
    env = {'JAX_COMPILATION_CACHE_DIR': os.environ[COMPILATION_CACHE_ENV]}
    env.update({name.upper(): str(value) for name, value in COMPILATION_CACHE_SETTINGS.items()})
    return env


@pytest.fixture
def shared_compilations():
    """JAX's persistent compilation cache in the run's shared folder, for one test."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    settings = {'jax_compilation_cache_dir': os.environ[COMPILATION_CACHE_ENV]}
    settings.update(COMPILATION_CACHE_SETTINGS)
    before = {name: getattr(jax.config, name) for name in settings}
    for name, value in settings.items():
        jax.config.update(name, value)
    # JAX settles whether and where it caches at the first compilation after a reset.
    compilation_cache.reset_cache()
    try:
        yield
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()


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
        compilation_cache_env=compilation_cache_env,
    )
