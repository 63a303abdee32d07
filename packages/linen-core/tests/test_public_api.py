"""The ``__all__`` surfaces of linen.core and linen.module import and resolve.

linen.module is a separate distribution: its checks skip when it is not installed.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

SURFACES = [
    'linen.core',
    'linen.core.errors',
    'linen.core.config',
    'linen.core.lifting',
    'linen.core.plugin_bus',
    'linen.core.traverse_util',
    'linen.training',
    'linen.module',
    'linen.module.dispatch',
]

# The contracts with sibling distributions, recorded apart from the modules: a name
# leaves only with a minor version, so removing one means editing this record too.
CONTRACTS = json.loads((Path(__file__).parent / 'sibling_contracts.json').read_text())


@pytest.mark.parametrize('module_name', sorted(CONTRACTS))
def test_sibling_contracts_keep_their_names(module_name):
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == CONTRACTS[module_name]
    assert 'contract' in module.__doc__ and 'minor version' in module.__doc__


@pytest.mark.parametrize('module_name', SURFACES)
def test_every_name_in_all_resolves(module_name):
    module = pytest.importorskip(module_name)
    assert module.__all__, module_name
    assert len(module.__all__) == len(set(module.__all__))
    for name in module.__all__:
        assert getattr(module, name) is not None, f'{module_name}.{name}'


@pytest.mark.parametrize('module_name', SURFACES)
def test_star_import(module_name):
    pytest.importorskip(module_name)
    namespace: dict = {}
    exec(f'from {module_name} import *', namespace)
    module = importlib.import_module(module_name)
    assert set(module.__all__) <= set(namespace)


def test_linen_is_a_namespace_package():
    import linen

    assert getattr(linen, '__file__', None) is None


def test_core_surface_has_flax_core_names():
    import linen.core as core

    for name in [
        'Scope',
        'init',
        'apply',
        'bind',
        'lazy_init',
        'DenyList',
        'FrozenDict',
        'freeze',
        'unfreeze',
        'copy',
        'pop',
        'meta',
        'Variable',
    ]:
        assert name in core.__all__


def test_module_surface():
    module = pytest.importorskip('linen.module')

    for name in [
        'Module',
        'compact',
        'nowrap',
        'compact_name_scope',
        'apply',
        'init',
        'init_with_output',
        'intercept_methods',
        'share_scope',
        'merge_param',
        'Variable',
        'derive_profiling_name',
    ]:
        assert name in module.__all__


def test_unknown_core_attribute_raises():
    import linen.core as core

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = core.nope


def test_facade_names_of_module_and_core_resolve_to_the_same_objects():
    import linen.core as core
    import linen.nn as nn

    module = pytest.importorskip('linen.module')

    assert nn.Module is module.Module
    assert nn.compact is module.compact
    assert nn.DenyList is core.DenyList
    assert nn.FrozenDict is core.FrozenDict
    assert nn.Variable is core.Variable
