"""A fixed-seed slice of the plugin-set fuzzer (``plugin_sets.py``), run by CI.

Each set is loaded in a fresh interpreter (the plugin manager loads once per
process), so the slice is a few sets; ``nox -s fuzz -- --plugin-sets N`` runs more.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integration_tests.fuzz import plugin_sets


@pytest.mark.slow
def test_plugin_set_slice_isolates_every_fault():
    report = plugin_sets.run('ci', 3)
    assert report.sets == 3
    assert not report.failures, report.summary()


def test_the_checker_blames_a_fault_reported_against_nobody():
    faulty = plugin_sets.Plugin('fz-chk-d0', 'fzpkg_chk_0', 'fzepchkx0x0z', 0, 'raises')
    healthy = plugin_sets.Plugin('fz-chk-d0', 'fzpkg_chk_0', 'fzepchkx0x1z', 1, 'healthy')
    plugin_set = plugin_sets.PluginSet([faulty, healthy], ['fz-chk-d0'])
    fine = {
        'warnings': [['PluginWarning', 'plugin "fzepchkx0x0z" (fz-chk-d0) raised']],
        'listed': [healthy.own_name],
        'access': {
            healthy.own_name: ['ok', 'fzpkg_chk_0.plugins', 'P1'],
            'FzNeverExported': ['error', 'AttributeError', 'no', ['AttributeError']],
        },
        'first_party': [True, 'Module'],
    }
    assert plugin_sets.check(plugin_set, fine) == []
    silent = {**fine, 'warnings': []}
    assert any('not reported against it' in p for p in plugin_sets.check(plugin_set, silent))
    collateral = {**fine, 'access': {**fine['access'], healthy.own_name: ['error', 'X', '', []]}}
    assert any(healthy.own_name in p for p in plugin_sets.check(plugin_set, collateral))
