"""Every developer and CI task of the linen workspace is a nox session.

    python3 -m nox -s demo         the smallest end-to-end example
    python3 -m nox -s tests        tests(cpu); tests(cuda) skips without an NVIDIA GPU
    python3 -m nox -s tests_matrix the CPU tests on Python 3.11, 3.12 and 3.13
    python3 -m nox -s lint         ruff check + ruff format --check
    python3 -m nox -s build        wheel + sdist of every distribution into dist/, checked
    python3 -m nox -s bench        benchmarks (see benchmarks/)

Distributions are discovered from ``packages/*/pyproject.toml``: adding one is
adding a folder, nothing here changes.
"""

from __future__ import annotations

import ast
import email.parser
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import nox

# uv makes the repeated JAX installs of the sessions fast; virtualenv where uv is absent.
nox.options.default_venv_backend = 'uv|virtualenv'
# A Python of the matrix that is not installed is skipped, also when CI is set.
nox.options.error_on_missing_interpreters = False
nox.options.sessions = ['lint', 'tests']

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
    'hatchling',
    'build',
    # The integration tests build wheels and make throwaway venvs with uv.
    'uv',
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


def _install_workspace(session: nox.Session, backend: str = 'cpu') -> None:
    jax = 'jax[cuda12]' if backend == 'cuda' else 'jax'
    # One resolver call: the local distributions satisfy each other's ranges, so
    # nothing named linen-* is looked up on an index.
    fixtures = [str(FIXTURES / name) for name in INSTALLED_FIXTURES if (FIXTURES / name).is_dir()]
    session.install(*_editable_args(), jax, *TEST_DEPS, *fixtures)


def _install_workspace_runtime(session: nox.Session) -> None:
    session.install(*_editable_args(), 'jax')


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


def _run_tests(session: nox.Session) -> None:
    session.run(
        'python',
        '-m',
        'pytest',
        *_test_paths(),
        '-q',
        '-n',
        'auto',
        '--durations=15',
        *session.posargs,
    )


@nox.session
@nox.parametrize('backend', ['cpu', 'cuda'], ids=['cpu', 'cuda'])
def tests(session: nox.Session, backend: str) -> None:
    """Every distribution's tests, the integration tests and the executable docs."""
    if backend == 'cuda' and not _has_nvidia_gpu():
        session.skip('no NVIDIA GPU here (`nvidia-smi -L` failed); the CUDA tests need one')
    _install_workspace(session, backend)
    _run_tests(session)


@nox.session(python=PYTHONS)
def tests_matrix(session: nox.Session) -> None:
    """The CPU tests on every supported Python; a missing interpreter is skipped."""
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


@nox.session
def demo(session: nox.Session) -> None:
    """The smallest end-to-end example: ``examples/demo.py``."""
    _install_workspace_runtime(session)
    demo_script = ROOT / 'examples' / 'demo.py'
    if not demo_script.is_file():
        session.skip('examples/demo.py does not exist yet')
    session.run('python', str(demo_script), *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against Flax, Haiku and pure JAX (``python -m benchmarks.run``)."""
    if not (ROOT / 'benchmarks' / 'run.py').is_file():
        session.skip('benchmarks/run.py does not exist yet')
    session.install(*_editable_args(), 'jax', 'flax', 'dm-haiku', 'equinox', 'optax', 'matplotlib')
    # `nox -s bench -- --publish` also refreshes benchmarks/RESULTS.md.
    session.run('python', '-m', 'benchmarks.run', '--out', 'bench-out', *session.posargs)


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
