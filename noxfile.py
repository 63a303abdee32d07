"""Every developer and CI task of the linen workspace is a nox session.

    python3 -m nox -s demo         train a CNN on scikit-learn's digits end to end (examples/demo.py)
    python3 -m nox -s docs         build the Sphinx site into site/ (warnings are errors),
                                   then open every page in headless Chromium
    python3 -m nox -s tests        the whole suite on the oldest supported JAX (pinned,
                                   Python 3.11) and on the newest (Python 3.12); one end:
                                   -s "tests-3.11(cpu)"; the CUDA variants skip without
                                   an NVIDIA GPU
    python3 -m nox -s tests_matrix the CPU tests on Python 3.11, 3.12 and 3.13
    python3 -m nox -s lint         ruff check + ruff format --check, pyright on the public
                                   surface, import-linter contracts (lint-imports)
    python3 -m nox -s build        wheel + sdist of every distribution into dist/, checked
    python3 -m nox -s bench        benchmarks (see benchmarks/)
    python3 -m nox -s fuzz         differential fuzzing against Flax: -- --programs N |
                                   --minutes M | --seed S | --checkpoints N | --plugin-sets N
    python3 -m nox -s flax_tests   Flax's own tests/linen and tests/core, fetched from the
                                   Flax sdist, run unmodified against linen (a figure, not CI)

Distributions are discovered from ``packages/*/pyproject.toml``: adding one is
adding a folder, nothing here changes.
"""

from __future__ import annotations

import ast
import email.parser
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import nox

# uv makes the repeated JAX installs of the sessions fast; virtualenv where uv is absent.
nox.options.default_venv_backend = 'uv|virtualenv'
# A missing interpreter fails the run: the two JAX ends are the tested range, and a
# run that silently skipped one would be green for a range it never saw.
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ['lint', 'tests']

# The supported JAX range, tested at both ends (every distribution declares it).
# The floor is pinned; the newest is whatever the index has for that Python (JAX 0.11+
# needs Python 3.12).
JAX_OLDEST = '0.10.0'
# The Python of each end: the floor on the oldest supported Python, the newest JAX on
# the first Python that carries it.
PYTHON_OLDEST_JAX = '3.11'
PYTHON_NEWEST_JAX = '3.12'
# Both ends run the whole suite. It fits CI's time limit on two cores because the
# root conftest compiles at XLA's LLVM optimization level 0 (the suite is mostly XLA
# compiling small programs) and the layer harness compiles what it ran op by op.

ROOT = Path(__file__).resolve().parent
PACKAGES = ROOT / 'packages'
FIXTURES = ROOT / 'integration_tests' / 'fixtures'
DIST = ROOT / 'dist'
PYTHONS = ['3.11', '3.12', '3.13']

TEST_DEPS = [
    'pytest',
    # Most of the suite's time is JAX compiling on one core; a worker per core
    # halves the wall time on CI's two cores.
    'pytest-xdist',
    'flax',
    'dm-haiku',
    'equinox',
    'optax',
    'msgpack',
    'matplotlib',
    # linen-profiling's Report.to_pandas is tested when pandas is installed.
    'pandas',
    # integration_tests/test_flax_module_lifecycle.py pickles Modules as Flax's tests do.
    'cloudpickle',
    'hatchling',
    'build',
    # Checkpoints across meshes (integration_tests/test_sharded_training.py) and the
    # demo's checkpoint (integration_tests/test_demo.py).
    'orbax-checkpoint',
    # The integration tests build wheels and make throwaway venvs with uv.
    'uv',
    # integration_tests/test_demo.py runs examples/demo.py (examples/requirements.txt).
    'scikit-learn',
    'rich',
    # docs/test_site_hooks.py builds a tiny site with the extension that draws the
    # pages' pictures (Sphinx and MyST; the site's theme is not needed).
    'sphinx>=8.2',
    'myst-parser>=4',
    # integration_tests/test_thirdparty_transformers.py runs Hugging Face's Flax models
    # (the 4.x line is the last with them) on Flax and on linen.
    'transformers>=4.40,<5',
]

# What the examples import beyond the workspace, listed once in examples/requirements.txt
# (examples/demo.py reads the same file to name what is missing).
DEMO_REQUIREMENTS = ROOT / 'examples' / 'requirements.txt'

# The site build: Sphinx with the Furo theme, MyST for the Markdown pages, MathML for
# math (no script, no network), and what the pages whose pictures are drawn at build
# time import (docs/_site_hooks.py runs them: getting-started.md and profiling.md).
# Then docs/test_browser.py opens every page in Debian's Chromium through Playwright
# (the Python package only: its browser download is never used).
DOCS_DEPS = [
    'sphinx>=8.2',
    'furo>=2024.8.6',
    'myst-parser>=4',
    'latex2mathml>=3.77',
    'playwright>=1.49',
    'pytest',
    'optax',
    'matplotlib',
    'rich',
]

# Third-party plugin fixture installed into the test environment the way a user
# installs a package (not editable). The clash and broken fixtures are installed
# only into throwaway locations by the tests themselves: installed here they
# would disturb every other test.
INSTALLED_FIXTURES = ['linen-plugin-example']


def distributions() -> list[Path]:
    """Every distribution folder, ``linen-core`` first (the others depend on it)."""
    found = sorted(p.parent for p in PACKAGES.glob('*/pyproject.toml'))
    return sorted(found, key=lambda p: (p.name != 'linen-core', p.name))


def _editable_args() -> list[str]:
    args: list[str] = []
    for dist in distributions():
        args += ['-e', str(dist)]
    return args


def _expose_pyenv_interpreters() -> None:
    """Make ``python3.X`` of every pyenv-installed Python findable by nox.

    pyenv's shims answer only for the versions selected globally; the others exist
    under ``$PYENV_ROOT/versions`` but a shim refuses to run them. A directory of
    ``python3.X`` links, first on PATH, lets nox (and uv) find each one without
    changing which ``python3`` the rest of the machine gets.
    """
    versions = Path(os.environ.get('PYENV_ROOT', Path.home() / '.pyenv')) / 'versions'
    found = sorted(versions.glob('3.*/bin/python3.*[0-9]'))
    if not found:
        return
    links = ROOT / '.nox' / '_interpreters'
    links.mkdir(parents=True, exist_ok=True)
    for binary in found:
        if binary.name.count('.') != 1 or not os.access(binary, os.X_OK):
            continue
        link = links / binary.name
        if not link.exists():
            link.symlink_to(binary)
    os.environ['PATH'] = f'{links}{os.pathsep}{os.environ.get("PATH", "")}'


_expose_pyenv_interpreters()


def _install_workspace(session: nox.Session, backend: str = 'cpu', jax: str = 'jax') -> None:
    if backend == 'cuda':
        jax = jax.replace('jax', 'jax[cuda12]', 1)
    # One resolver call: the local distributions satisfy each other's ranges, so
    # nothing named linen-* is looked up on an index.
    fixtures = [str(FIXTURES / name) for name in INSTALLED_FIXTURES if (FIXTURES / name).is_dir()]
    session.install(*_editable_args(), jax, *TEST_DEPS, *fixtures)
    session.run('python', '-c', 'import jax; print("JAX", jax.__version__)')


def _test_paths() -> list[str]:
    paths = [str(d / 'tests') for d in distributions() if (d / 'tests').is_dir()]
    for extra in ('integration_tests', 'docs'):
        if (ROOT / extra).is_dir():
            paths.append(extra)
    return paths


def _has_nvidia_gpu() -> bool:
    if shutil.which('nvidia-smi') is None:
        return False
    try:
        result = subprocess.run(['nvidia-smi', '-L'], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0 and b'GPU' in result.stdout


def _run_tests(
    session: nox.Session, paths: list[str] | None = None, env: dict | None = None
) -> None:
    # No persistent compilation cache for the whole suite: its key leaves out op
    # metadata, so a hit hands a program compiled under other profiling labels to the
    # tests that read labels from the compiled HLO. The differential tests that only
    # compare values opt in (integration_tests/conftest.py, `shared_compilations`).
    #
    # Bytecode: uv installs none (pip compiles at install), and an environment with
    # PYTHONDONTWRITEBYTECODE set makes every fresh interpreter of the suite (about a
    # hundred: plugin probes, throwaway venvs, the Hugging Face and benchmark
    # workers) compile JAX's, Flax's and transformers' sources again, which costs
    # several times the import itself. Written once, outside the source trees.
    bytecode = {
        'PYTHONDONTWRITEBYTECODE': '',
        'PYTHONPYCACHEPREFIX': str(Path(session.virtualenv.location) / 'pycache'),
    }
    session.run(
        'python',
        '-m',
        'pytest',
        *(paths or _test_paths()),
        '-q',
        '-n',
        'auto',
        # A few tests run for a minute (the benchmark smoke, the demo); stealing
        # keeps the other worker busy instead of idle at the end.
        '--dist',
        'worksteal',
        '--durations=15',
        *session.posargs,
        env={**bytecode, **(env or {})},
    )


@nox.session(python=[PYTHON_OLDEST_JAX, PYTHON_NEWEST_JAX])
@nox.parametrize('backend', ['cpu', 'cuda'], ids=['cpu', 'cuda'])
def tests(session: nox.Session, backend: str) -> None:
    """The whole suite on the pinned oldest JAX (3.11) and on the newest (3.12)."""
    if backend == 'cuda' and not _has_nvidia_gpu():
        session.skip('no NVIDIA GPU here (`nvidia-smi -L` failed); the CUDA tests need one')
    oldest = session.python == PYTHON_OLDEST_JAX
    _install_workspace(session, backend, f'jax=={JAX_OLDEST}' if oldest else 'jax')
    # The interpreter is the one asked for, never a fallback that would test the
    # wrong end of the range while looking green.
    session.run(
        'python', '-c',
        f'import sys; assert sys.version_info[:2] == {tuple(map(int, session.python.split(".")))}, sys.version',
    )  # fmt: skip
    # The suite's two largest parts are differential sweeps against Flax, and the
    # oldest JAX runs them 1.5-2.5 times slower: there CI runs the fuzz slice's first
    # 40 programs and three of the six Hugging Face models (all at the newest; see
    # integration_tests/fuzz/test_fuzz_slice.py, test_thirdparty_transformers.py),
    # which keeps CI within its budget.
    env = (
        {
            'LINEN_FUZZ_SLICE_PROGRAMS': '40',
            'LINEN_TRANSFORMERS_CASES': 'bert,roberta_remat,gpt2',
        }
        if oldest
        else {}
    )
    _run_tests(session, env=env)


@nox.session(python=PYTHONS)
def tests_matrix(session: nox.Session) -> None:
    """The CPU tests on every supported Python, each with the newest JAX it resolves."""
    _install_workspace(session, 'cpu')
    _run_tests(session)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the repository; pyright on the public surface.

    pyright's scope is ``[tool.pyright]`` in pyproject.toml (basic mode): every
    distribution's ``__init__`` and ``errors`` modules and the ``linen.nn`` stub,
    with ``integration_tests/typing`` using the facade as a user would.
    """
    session.install('ruff')
    session.run('ruff', 'check', '.')
    session.run('ruff', 'format', '--check', '.')
    # pyright resolves imports in this environment, so the distributions go in too.
    session.install('pyright', *_editable_args(), 'jax')
    session.run('pyright', '--pythonpath', session.virtualenv.location + '/bin/python')
    # The layer order between the distributions (import-linter, contracts in
    # pyproject.toml), found through the distributions installed above.
    session.install('import-linter')
    session.run('lint-imports')


@nox.session
def demo(session: nox.Session) -> None:
    """Train a CNN on scikit-learn's digits end to end: ``examples/demo.py``.

    Outputs (checkpoint, curves, tables, profiler trace) go to ``demo-out/``;
    ``nox -s demo -- --help`` lists the options (``--epochs``, ``--out``, ...).
    """
    script = str(ROOT / 'examples' / 'demo.py')
    if {'-h', '--help'} & set(session.posargs):
        # The options need nothing installed: answer before the installs.
        session.run('python', script, '--help')
        return
    session.install(*_editable_args(), 'jax', '-r', str(DEMO_REQUIREMENTS))
    session.run('python', script, *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """The Sphinx site into site/, warnings as errors; then every page checked in Chromium.

    The API pages (one per public name) and the pages' pictures are written at
    build time (docs/_site_hooks.py), so neither is ever stale or committed. Every
    executable code block runs in ``nox -s tests`` (docs/test_docs.py). Then
    docs/test_browser.py opens every built page in headless Chromium, installed
    from Debian here when missing (``LINEN_CHROMIUM`` names another binary).
    ``nox -s docs -- -j 2`` passes options to sphinx-build.
    """
    session.install(*_editable_args(), 'jax', *DOCS_DEPS)
    site = ROOT / 'site'
    # Doctrees outside site/, so the published folder holds only the site; -E reads
    # every source afresh (Sphinx does not notice a changed docstring or extension).
    doctrees = ROOT / '.nox' / '_docs_doctrees'
    session.run(
        'python', '-m', 'sphinx', '-W', '--keep-going', '-E', '-q', '-b', 'html', '-d', str(doctrees),
        *session.posargs, 'docs', str(site),
    )  # fmt: skip
    session.run(
        'python', '-m', 'pytest', 'docs/test_browser.py', '-q', '-p', 'no:cacheprovider',
        env={'LINEN_DOCS_SITE': str(site), 'LINEN_CHROMIUM': _chromium(session)},
    )  # fmt: skip


def _chromium(session: nox.Session) -> str:
    """Debian's Chromium, installed with apt-get when it is missing (CI runs as root)."""
    found = os.environ.get('LINEN_CHROMIUM') or shutil.which('chromium')
    if found:
        return found
    if shutil.which('apt-get') is None or os.geteuid() != 0:
        session.error(
            'docs/test_browser.py needs Chromium: install it (Debian: apt-get install '
            'chromium) or name the binary in LINEN_CHROMIUM'
        )
    session.run('apt-get', 'update', '-q', external=True)
    session.run(
        'apt-get', 'install', '-y', '-q', '--no-install-recommends', 'chromium', external=True
    )
    return shutil.which('chromium') or session.error('apt-get installed no chromium binary')


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against Flax, Haiku and pure JAX (``python -m benchmarks.run``)."""
    session.install(*_editable_args(), 'jax', 'flax', 'dm-haiku', 'equinox', 'optax', 'matplotlib')
    # `nox -s bench -- --publish` also refreshes benchmarks/RESULTS.md.
    session.run('python', '-m', 'benchmarks.run', '--out', 'bench-out', *session.posargs)


@nox.session
def fuzz(session: nox.Session) -> None:
    """Differential fuzzing against Flax (``integration_tests/fuzz/``).

    ``nox -s fuzz -- --programs N`` (or ``--minutes M``; ``--seed S`` picks the
    programs) runs generated Linen programs under ``flax.linen`` and ``linen.nn`` and
    writes a shrunk reproducer for each new difference; ``--checkpoints N`` and
    ``--plugin-sets N`` run the checkpoint and plugin-set fuzzers instead. CI runs a
    fixed-seed slice of each and every reproducer (``nox -s tests``).
    """
    _install_workspace(session, 'cpu')
    session.run('python', '-m', 'integration_tests.fuzz', *session.posargs)


@nox.session(python=[PYTHON_OLDEST_JAX, PYTHON_NEWEST_JAX])
def flax_tests(session: nox.Session) -> None:
    """Flax's own tests run on linen (``tools/flax_own_tests.py``): how many pass.

    Not part of CI: it downloads Flax's source distribution, and the tests that reach
    into Flax's private helpers fail by construction. Arguments after ``--`` go to
    pytest (``nox -s flax_tests -- -k scan``).
    """
    oldest = session.python == PYTHON_OLDEST_JAX
    _install_workspace(session, 'cpu', f'jax=={JAX_OLDEST}' if oldest else 'jax')
    session.install('absl-py')
    session.run(
        'python',
        'tools/flax_own_tests.py',
        '--',
        *(session.posargs or ['linen', 'core', '-n', 'auto']),
    )


# --------------------------------------------------------------------------- build


@nox.session
def build(session: nox.Session) -> None:
    """Wheel and sdist of every distribution into dist/, then check each wheel's metadata."""
    session.install('build[uv]')
    if DIST.exists():
        shutil.rmtree(DIST)
    for dist in distributions():
        # Isolated builds, so a missing build requirement in a pyproject fails here.
        session.run(
            'python', '-m', 'build', '--installer', 'uv', '--sdist', '--wheel',
            '--outdir', str(DIST), str(dist),
        )  # fmt: skip
    problems = check_wheels(DIST, distributions())
    if problems:
        session.error('wheel metadata check failed:\n  ' + '\n  '.join(problems))
    session.log(f'{len(distributions())} wheels and sdists in dist/ have consistent metadata')


def read_version(dist: Path) -> str:
    """The version in ``src/linen/<x>/__about__.py`` (the one place it lives)."""
    (about,) = dist.glob('src/linen/*/__about__.py')
    for node in ast.parse(about.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == '__version__' for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise ValueError(f'{about} sets no __version__')


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r'\d+', version)[:3])


_LINEN_REQUIREMENT = re.compile(r'^(linen-[a-z0-9-]+)(?:\[[^\]]*\])?\s*\(?([^;)]*)\)?\s*(;.*)?$')


def check_wheels(dist_dir: Path, dists: list[Path]) -> list[str]:
    """Problems with the built wheels: wrong version, ``==`` or unbounded sibling ranges."""
    versions = {d.name: read_version(d) for d in dists}
    problems: list[str] = []
    for name, version in versions.items():
        stem = name.replace('-', '_')
        wheels = list(dist_dir.glob(f'{stem}-*.whl'))
        sdists = list(dist_dir.glob(f'{stem}-*.tar.gz'))
        if len(wheels) != 1 or len(sdists) != 1:
            problems.append(f'{name}: expected one wheel and one sdist, found {wheels + sdists}')
            continue
        with zipfile.ZipFile(wheels[0]) as whl:
            (metadata_name,) = [n for n in whl.namelist() if n.endswith('.dist-info/METADATA')]
            metadata = email.parser.BytesParser().parsebytes(whl.read(metadata_name))
        if metadata['Name'] != name:
            problems.append(f'{name}: wheel metadata names {metadata["Name"]!r}')
        if metadata['Version'] != version:
            problems.append(
                f'{name}: wheel version {metadata["Version"]} != __about__.py {version}'
            )
        for requirement in metadata.get_all('Requires-Dist') or []:
            match = _LINEN_REQUIREMENT.match(requirement.strip())
            if not match:
                continue
            sibling, spec = match.group(1), match.group(2).replace(' ', '')
            problems += _check_range(name, sibling, spec, versions.get(sibling))
    return problems


def _check_range(owner: str, sibling: str, spec: str, sibling_version: str | None) -> list[str]:
    clauses = dict(
        (m.group(1), m.group(2)) for m in re.finditer(r'(>=|<=|==|~=|<|>|!=)([^,]+)', spec)
    )
    where = f'{owner} requires {sibling}{spec}'
    if '==' in clauses or '~=' in clauses or not ('>=' in clauses and '<' in clauses):
        return [f'{where}: use a compatible range ">=X,<Y", not a pin or an open bound']
    if sibling_version is None:
        return [f'{where}: no distribution folder packages/{sibling}']
    low, high = _version_tuple(clauses['>=']), _version_tuple(clauses['<'])
    if not low <= _version_tuple(sibling_version) < high:
        return [f'{where}: the workspace has {sibling} {sibling_version}, outside the range']
    return []
