"""The distributions meet only through each other's public modules, in layer order.

Each distribution is versioned on its own and its siblings depend on a compatible
range (``linen-core>=0.1,<0.2``), so a sibling may rely only on names a patch
release cannot rename: underscore modules and underscore names of another
distribution are off limits (the public contracts are ``linen.core.lifting``,
``linen.core.plugin_bus``, ``linen.module.dispatch`` and the packages' ``__all__``).
The layers are those of docs/design.md: core imports nothing of the others; module only
core; transforms core and module; layers core, module and transforms; profiling
core and module.

The sources are parsed, not imported: every ``import`` statement counts (also
those inside functions and ``TYPE_CHECKING`` blocks), and so do string constants
that name a module (``'linen.core._scope:Variable'``, the lazy export tables the
plugin bus resolves). Reading another distribution's private attribute
(``scope._root`` from linen-transforms) fails too. ``nox -s lint`` checks the layer order once more with
import-linter (contracts in the workspace ``pyproject.toml``).
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / 'packages'

# distribution -> the distributions it may import (itself included).
LAYERS = {
    'linen-core': {'linen-core'},
    'linen-module': {'linen-core', 'linen-module'},
    'linen-transforms': {'linen-core', 'linen-module', 'linen-transforms'},
    'linen-layers': {'linen-core', 'linen-module', 'linen-transforms', 'linen-layers'},
    'linen-profiling': {'linen-core', 'linen-module', 'linen-profiling'},
}

# A string constant that names a linen module, maybe with ``:attr`` (an export table entry).
_MODULE_STRING = re.compile(r'linen(\.[A-Za-z_]\w*)+(:[A-Za-z_][\w.]*)?')


def owners() -> dict[str, str]:
    """``{'linen.core': 'linen-core', 'linen.nn': 'linen-core', ...}`` from the source tree."""
    table = {}
    for dist in sorted(PACKAGES.glob('*/pyproject.toml')):
        for package in sorted((dist.parent / 'src' / 'linen').iterdir()):
            if (package / '__init__.py').is_file():
                table[f'linen.{package.name}'] = dist.parent.name
    return table


def _is_private(name: str) -> bool:
    return name.startswith('_') and not (name.startswith('__') and name.endswith('__'))


@dataclass(frozen=True)
class Reference:
    """A use of module ``target`` (and maybe its attribute ``name``) at ``where``."""

    where: str
    target: str
    name: str | None = None


def references(source: str, package: str, where: str) -> list[Reference]:
    """Every module (and imported name) that ``source``, a file of ``package``, refers to."""
    found = []
    for node in ast.walk(ast.parse(source)):
        at = f'{where}:{getattr(node, "lineno", 0)}'
        if isinstance(node, ast.Import):
            found += [Reference(at, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parts = package.split('.')
                anchor = '.'.join(parts[: len(parts) - node.level + 1])
                base = f'{anchor}.{base}' if base else anchor
            found += [Reference(at, base, alias.name) for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _MODULE_STRING.fullmatch(node.value):
                target, _, attr = node.value.partition(':')
                found.append(Reference(at, target, attr.split('.')[0] or None))
    return found


def _owner(module: str, table: dict[str, str]) -> str | None:
    parts = module.split('.')
    return table.get('.'.join(parts[:2])) if len(parts) >= 2 and parts[0] == 'linen' else None


def violations(refs: list[Reference], own: str, table: dict[str, str]) -> list[str]:
    """Private cross-distribution uses and imports against the layer order."""
    problems = []
    for ref in refs:
        other = _owner(ref.target, table)
        if other is None or other == own:
            continue
        if other not in LAYERS[own]:
            problems.append(f'{ref.where}: {own} imports {ref.target} of {other} (layering)')
        components = ref.target.split('.')[2:] + ([ref.name] if ref.name else [])
        private = [c for c in components if _is_private(c)]
        if private:
            shown = ref.target + (f' ({ref.name})' if ref.name else '')
            problems.append(
                f'{ref.where}: {own} uses {shown}, a private name of {other}; '
                'use its public contract module'
            )
    return problems


def _sources():
    for path in sorted(PACKAGES.glob('*/src/linen/**/*.py')):
        dist = path.relative_to(PACKAGES).parts[0]
        package = path.parent.relative_to(PACKAGES / dist / 'src')
        yield dist, '.'.join(package.parts), path


def test_the_layer_table_covers_every_distribution():
    dists = {p.parent.name for p in PACKAGES.glob('*/pyproject.toml')}
    assert dists == set(LAYERS)
    assert set(owners().values()) == dists


@pytest.mark.parametrize('dist', sorted(LAYERS))
def test_no_private_or_upward_imports_between_distributions(dist):
    table = owners()
    problems = []
    files = 0
    for owner, package, path in _sources():
        if owner != dist:
            continue
        files += 1
        where = str(path.relative_to(ROOT))
        problems += violations(references(path.read_text(), package, where), dist, table)
    assert files > 0
    assert not problems, '\n'.join(problems)


def private_attributes(source: str) -> tuple[set[str], list[tuple[int, str]]]:
    """The private names ``source`` defines, and its ``x._name`` reads (``x`` not self/cls).

    Defined: functions, classes, assigned names and attributes, and identifier-like
    string constants (``__slots__`` entries, ``d['_state'] = ...``).
    """
    defined: set[str] = set()
    reads = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.isidentifier():
                defined.add(node.value)
        elif isinstance(node, ast.Attribute) and _is_private(node.attr):
            if isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
            elif not (isinstance(node.value, ast.Name) and node.value.id in ('self', 'cls')):
                reads.append((node.lineno, node.attr))
    return {name for name in defined if _is_private(name)}, reads


def test_no_distribution_reads_private_attributes_of_another():
    """``scope._root`` from linen-transforms is as private as ``linen.core._scope``."""
    defined: dict[str, set[str]] = {dist: set() for dist in LAYERS}
    reads = []
    for dist, _, path in _sources():
        names, found = private_attributes(path.read_text())
        defined[dist] |= names
        reads += [(dist, f'{path.relative_to(ROOT)}:{line}', attr) for line, attr in found]
    problems = [
        f'{where}: {dist} reads .{attr}, a private attribute of {", ".join(owners)}'
        for dist, where, attr in reads
        if attr not in defined[dist]
        for owners in [sorted(d for d in defined if attr in defined[d])]
        if owners
    ]
    assert not problems, '\n'.join(problems)


@pytest.mark.parametrize('dist', sorted(LAYERS))
def test_declared_dependencies_match_the_layers(dist):
    """A sibling imported must be a declared dependency (the wheel installs it)."""
    project = tomllib.loads((PACKAGES / dist / 'pyproject.toml').read_text())['project']
    declared = {
        m.group(0)
        for requirement in project.get('dependencies', [])
        if (m := re.match(r'linen-[a-z]+', requirement))
    }
    assert declared | {dist} == LAYERS[dist]


# ------------------------------------------------------------ the checker itself

_TABLE = {
    'linen.core': 'linen-core',
    'linen.module': 'linen-module',
    'linen.layers': 'linen-layers',
}


@pytest.mark.parametrize(
    'source',
    [
        'from linen.core._scope import _Root',
        'from linen.core import _plugins',
        'import linen.core._rng',
        'def f():\n    from linen.core.lifting import _secret',
        "EXPORTS = {'Variable': 'linen.core._scope:Variable'}",
    ],
)
def test_checker_catches_private_imports(source):
    refs = references(source, 'linen.module', 'x.py')
    problems = violations(refs, 'linen-module', _TABLE)
    assert len(problems) == 1 and 'private name of linen-core' in problems[0]


def test_checker_catches_upward_imports():
    refs = references('import linen.layers', 'linen.module', 'x.py')
    (problem,) = violations(refs, 'linen-module', _TABLE)
    assert 'layering' in problem


@pytest.mark.parametrize(
    'source',
    [
        'from linen.core import Scope, lifting',
        'from linen.core.lifting import detached_scope',
        'from linen.module import _capture',  # its own private module
        'from . import _dispatch',
        'from linen.core.__about__ import __version__',
        "'linen.core is great'",
    ],
)
def test_checker_allows_public_and_own_names(source):
    refs = references(source, 'linen.module', 'x.py')
    assert violations(refs, 'linen-module', _TABLE) == []


def test_private_attribute_reads_are_found():
    defined, reads = private_attributes(
        'class A:\n    __slots__ = ("_root",)\n    def f(self, scope):\n'
        '        return self._own, scope._root, scope._collection(1)'
    )
    assert '_root' in defined
    assert reads == [(4, '_root'), (4, '_collection')]
