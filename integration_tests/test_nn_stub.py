"""The static views of the lazy modules match what they resolve to at run time.

``linen.nn`` has a stub (``__init__.pyi``) and ``linen.core``, ``linen.layers``,
``linen.transforms`` and ``linen.profiling`` have ``if TYPE_CHECKING:`` import
blocks, so type checkers and IDEs see real signatures (``nn.Dense(...)``). A stub
that drifts from the runtime table would lie to them; these tests keep both in step.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import linen.nn as nn
from linen.nn._hints import FIRST_PARTY, PROVIDED_BY

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / 'packages/linen-core/src/linen/nn/__init__.pyi'
LAZY_PACKAGES = {
    'linen.core': 'packages/linen-core/src/linen/core/__init__.py',
    'linen.layers': 'packages/linen-layers/src/linen/layers/__init__.py',
    'linen.transforms': 'packages/linen-transforms/src/linen/transforms/__init__.py',
    'linen.profiling': 'packages/linen-profiling/src/linen/profiling/__init__.py',
}


def _imports(statements) -> dict[str, tuple[str, str]]:
    """``asname -> (module, name)`` of the ``from m import n as asname`` statements."""
    out = {}
    for node in statements:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                out[alias.asname or alias.name] = (node.module, alias.name)
    return out


def _resolve(module: str, name: str):
    mod = importlib.import_module(module)
    try:
        return getattr(mod, name)
    except AttributeError:
        return importlib.import_module(f'{module}.{name}')


def test_stub_names_exactly_the_first_party_exports():
    stub = _imports(ast.parse(STUB.read_text()).body)
    stub.pop('PluginWarning')
    stub.pop('Any')
    table = nn._get_table()
    first_party = {n for n, e in table.entries.items() if e.distribution in FIRST_PARTY}
    assert set(stub) == first_party, (
        f'missing from the stub: {sorted(first_party - set(stub))}; not exported: '
        f'{sorted(set(stub) - first_party)}. Edit {STUB.name} to match the plugins.'
    )
    for name, (module, attr) in sorted(stub.items()):
        assert _resolve(module, attr) is getattr(nn, name), name


@pytest.mark.parametrize('package', sorted(LAZY_PACKAGES))
def test_type_checking_block_matches_the_lazy_names(package):
    tree = ast.parse((ROOT / LAZY_PACKAGES[package]).read_text())
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, 'id', None) == 'TYPE_CHECKING'
    ]
    declared = _imports(block.body)
    pkg = importlib.import_module(package)
    eager = {n for n in pkg.__all__ if n in vars(pkg)}
    lazy = set(pkg.__all__) - eager - {'__version__'}
    assert lazy <= set(declared), f'add to the TYPE_CHECKING block: {sorted(lazy - set(declared))}'
    for name, (module, attr) in sorted(declared.items()):
        assert _resolve(module, attr) is getattr(pkg, name), name


def test_every_distribution_ships_py_typed():
    for path in sorted((ROOT / 'packages').glob('*/src/linen/*/')):
        if path.name != '__pycache__':
            assert (path / 'py.typed').is_file(), path


def test_install_hints_name_every_first_party_export():
    # A name missing here would, with its distribution uninstalled, give a bare
    # AttributeError instead of the pip command that provides it.
    table = nn._get_table()
    wrong = {
        name: entry.distribution
        for name, entry in table.entries.items()
        if entry.distribution in FIRST_PARTY
        and entry.distribution != 'linen-core'
        and PROVIDED_BY.get(name) != entry.distribution
    }
    assert not wrong, f'add these to linen/nn/_hints.py: {wrong}'
