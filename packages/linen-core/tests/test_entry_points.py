"""The plugin bus's reading of entry points, against ``importlib.metadata`` as the oracle."""

from __future__ import annotations

import sys
import zipfile
from importlib import metadata

import pytest

from linen.core import _entry_points


def _dist(root, folder, entry_points=None):
    info = root / folder
    info.mkdir(parents=True)
    stem = folder.rpartition('.')[0]
    name = stem.partition('-')[0]
    (info / 'METADATA').write_text(
        f'Metadata-Version: 2.1\nName: {name}\nVersion: {stem.partition("-")[2]}\n'
    )
    if entry_points is not None:
        (info / 'entry_points.txt').write_text(entry_points)


def _ours(group):
    return sorted(
        (f.entry_point.name, f.entry_point.value, f.distribution.name, f.distribution.version)
        for f in _entry_points.entry_points(group)
    )


def _importlib(group):
    return sorted(
        (ep.name, ep.value, ep.dist.name, ep.dist.version)
        for ep in metadata.entry_points(group=group)
    )


@pytest.fixture
def layout(tmp_path, monkeypatch):
    first, second = tmp_path / 'first', tmp_path / 'second'
    _dist(first, 'alpha-1.0.dist-info', '[linen]\na = alpha.plugin\n')
    _dist(
        first,
        'Beta.Pkg-2.0.dist-info',
        '# comment\n\n[console_scripts]\nb = beta:main\n'
        '[linen]\n  beta = beta.plugin:hooks  \n# other = nothing\n',
    )
    _dist(first, 'no_eps-1.0.dist-info')
    _dist(first, 'other-1.0.dist-info', '[pytest11]\nother = other.plugin\n')
    _dist(first, 'legacy-0.1.egg-info', '[linen]\nlegacy = legacy.plugin\n')
    (first / 'alpha').mkdir()  # a package folder, not metadata
    # The same distributions again further down the path: importlib shadows them,
    # whatever the spelling of the name.
    _dist(second, 'alpha-9.0.dist-info', '[linen]\nshadowed = alpha.old\n')
    _dist(second, 'beta_pkg-1.0.dist-info', '[linen]\nshadowed_too = beta.old\n')
    _dist(second, 'gamma-1.0.dist-info', '[linen]\ngamma = gamma.plugin\n')
    monkeypatch.setattr(sys, 'path', [str(first), str(tmp_path / 'missing'), str(second)])
    return tmp_path


@pytest.mark.parametrize('group', ['linen', 'console_scripts', 'pytest11', 'absent'])
def test_directories_read_as_importlib_reads_them(layout, group):
    assert _entry_points._read_directories(group) is not None  # read here, not delegated
    assert _ours(group) == _importlib(group)


def test_shadowed_distributions_and_comments(layout):
    names = [found[0] for found in _ours('linen')]
    assert sorted(names) == ['a', 'beta', 'gamma', 'legacy']
    assert ('beta', 'beta.plugin:hooks', 'Beta.Pkg', '2.0') in _ours('linen')


def test_a_zip_on_the_path_is_left_to_importlib(layout, monkeypatch):
    archive = layout / 'bundle.zip'
    with zipfile.ZipFile(archive, 'w') as zf:
        zf.writestr('zipped-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\nName: zipped\n')
        zf.writestr('zipped-1.0.dist-info/entry_points.txt', '[linen]\nz = zipped.plugin\n')
    monkeypatch.setattr(sys, 'path', [*sys.path, str(archive)])
    assert _entry_points._read_directories('linen') is None
    found = {(f.entry_point.name, f.entry_point.value) for f in _entry_points.entry_points('linen')}
    assert ('z', 'zipped.plugin') in found and ('a', 'alpha.plugin') in found


def test_another_distribution_finder_is_left_to_importlib(layout, monkeypatch):
    class Finder:
        @staticmethod
        def find_distributions(context=None):
            return iter(())

        @staticmethod
        def find_spec(*args, **kwargs):
            return None

    monkeypatch.setattr(sys, 'meta_path', [*sys.meta_path, Finder])
    assert _entry_points._read_directories('linen') is None
    assert _ours('linen') == _importlib('linen')


def test_the_installed_linen_plugins():
    # This interpreter's own path: the first-party plugins, found as importlib finds them.
    assert _ours('linen') == _importlib('linen')
    assert {'core', 'module'} <= {found[0] for found in _ours('linen')}
