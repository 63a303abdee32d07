"""The files generated from the name tables are current, and say what runs.

Each distribution lists its public names once (``_exports.py``);
``tools/generate_names.py`` writes the type stubs (``__init__.pyi`` of each lazy
package and of ``linen.nn``, and one per module ``linen.nn`` exports) and
``linen/nn/_first_party.json`` (which distribution provides each first-party name,
for the install hint). These tests
fail while a generated file is stale, and check the generated text against what
the packages and the facade resolve to at run time, so a generator bug cannot
hide behind its own output.
"""

from __future__ import annotations

import ast
import importlib
import runpy
import types
from pathlib import Path

import pytest

import linen.nn as nn
from linen.nn._hints import FIRST_PARTY, PROVIDED_BY

ROOT = Path(__file__).resolve().parent.parent
NN_STUB = ROOT / 'packages/linen-core/src/linen/nn/__init__.pyi'
LAZY_PACKAGES = {
    'linen.core': 'packages/linen-core/src/linen/core/__init__.pyi',
    'linen.layers': 'packages/linen-layers/src/linen/layers/__init__.pyi',
    'linen.transforms': 'packages/linen-transforms/src/linen/transforms/__init__.pyi',
    'linen.profiling': 'packages/linen-profiling/src/linen/profiling/__init__.pyi',
}


def _stub_names(path: Path) -> dict[str, object]:
    """``public name -> object`` of what a stub declares (imports and assignments)."""
    out: dict[str, object] = {}
    tree = ast.parse(path.read_text())
    modules: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                value = _resolve(node.module, alias.name)
                if alias.asname:
                    out[alias.asname] = value
                else:
                    modules[alias.name] = value
        elif isinstance(node, ast.Assign):
            (target,) = node.targets
            assert isinstance(node.value, ast.Attribute), ast.dump(node)
            owner = modules[node.value.value.id]  # type: ignore[attr-defined]
            out[target.id] = getattr(owner, node.value.attr)  # type: ignore[attr-defined]
    return out


def _resolve(module: str | None, name: str):
    assert module is not None
    mod = importlib.import_module(module)
    try:
        return getattr(mod, name)
    except AttributeError:
        return importlib.import_module(f'{module}.{name}')


def test_generated_files_are_current():
    generator = runpy.run_path(str(ROOT / 'tools/generate_names.py'))
    stale = [str(p.relative_to(ROOT)) for p in generator['stale']()]
    assert not stale, f'run `python tools/generate_names.py`; stale: {stale}'


def test_nn_stub_names_exactly_the_first_party_exports():
    stub = _stub_names(NN_STUB)
    stub.pop('PluginWarning')
    table = nn._get_table()
    first_party = {n for n, e in table.entries.items() if e.distribution in FIRST_PARTY}
    assert set(stub) == first_party, (
        f'missing from the stub: {sorted(first_party - set(stub))}; not exported: '
        f'{sorted(set(stub) - first_party)}'
    )
    for name, value in sorted(stub.items()):
        assert value is getattr(nn, name), name


def test_a_submodule_stub_stands_for_each_module_the_facade_exports():
    # `import linen.nn.initializers` type-checks through `nn/initializers.pyi`; each
    # must star-import the module the facade imports under that name at run time.
    table = nn._get_table()
    modules = {
        name: getattr(nn, name)
        for name, entry in table.entries.items()
        if entry.distribution in FIRST_PARTY and isinstance(getattr(nn, name), types.ModuleType)
    }
    stubs = {p.stem: p for p in NN_STUB.parent.glob('*.pyi') if p.name != '__init__.pyi'}
    assert set(stubs) == set(modules)
    for name, path in sorted(stubs.items()):
        (node,) = [n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ImportFrom)]
        assert [a.name for a in node.names] == ['*'], name
        assert importlib.import_module(node.module or '') is modules[name], name
        assert importlib.import_module(f'linen.nn.{name}') is modules[name], name


@pytest.mark.parametrize('package', sorted(LAZY_PACKAGES))
def test_package_stub_declares_what_the_package_resolves(package):
    stub = _stub_names(ROOT / LAZY_PACKAGES[package])
    pkg = importlib.import_module(package)
    assert set(stub) == set(pkg.__all__)
    for name, value in sorted(stub.items()):
        assert value is getattr(pkg, name), name


def test_every_distribution_ships_py_typed():
    for path in sorted((ROOT / 'packages').glob('*/src/linen/*/')):
        if path.name != '__pycache__':
            assert (path / 'py.typed').is_file(), path


def test_install_hints_name_every_first_party_export():
    # A name missing here would, with its distribution uninstalled, give a bare
    # AttributeError instead of the pip command that provides it.
    table = nn._get_table()
    exported = {
        name: entry.distribution
        for name, entry in table.entries.items()
        if entry.distribution in FIRST_PARTY and entry.distribution != 'linen-core'
    }
    assert exported == PROVIDED_BY


@pytest.mark.parametrize('package', sorted(LAZY_PACKAGES))
def test_lazy_package_dir_and_missing_name(package):
    pkg = importlib.import_module(package)
    assert sorted(dir(pkg)) == sorted(pkg.__all__)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nope'"):
        _ = pkg.nope
