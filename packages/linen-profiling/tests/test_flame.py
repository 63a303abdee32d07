"""Icicle charts: box widths are inclusive shares; PNG and self-contained HTML files."""

import pytest

from linen.profiling import flame_boxes, flame_graph
from linen.profiling._costs import CostRow, ModuleCosts


def _row(path, own, inclusive):
    return CostRow(path, own, 0.0, 0.0, inclusive, 0.0, 0.0, 1)


COSTS = ModuleCosts(
    rows=(
        _row('M', 10.0, 100.0),
        _row('M/a', 60.0, 60.0),
        _row('M/b', 20.0, 30.0),
        _row('M/b/c', 10.0, 10.0),
        _row('', 5.0, 5.0),  # outside every module: not a box
    ),
    flops=105.0,
    transcendentals=0.0,
    bytes_accessed=0.0,
)


def test_boxes_are_inclusive_shares_laid_out_under_their_parent():
    boxes = {box.path: box for box in flame_boxes(COSTS, 'flops')}
    assert set(boxes) == {'M', 'M/a', 'M/b', 'M/b/c'}
    assert (boxes['M'].x, boxes['M'].width, boxes['M'].depth) == (0.0, 1.0, 0)
    assert (boxes['M/a'].x, boxes['M/a'].width) == (0.0, 0.6)
    assert boxes['M/b'].x == pytest.approx(0.6)
    assert boxes['M/b'].width == pytest.approx(0.3)
    assert boxes['M/b/c'].x == pytest.approx(0.6)
    assert boxes['M/b/c'].depth == 2


def test_png_and_html_files(tmp_path):
    png = flame_graph(COSTS, tmp_path / 'flame.png')
    with open(png, 'rb') as handle:
        assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
    page = (
        (tmp_path / 'flame.html').read_text() if flame_graph(COSTS, tmp_path / 'flame.html') else ''
    )
    assert page.startswith('<!DOCTYPE html>')
    assert 'M/b/c: 10 flops (10.0%)' in page
    assert '<script' not in page and 'src=' not in page and 'href=' not in page


def test_unknown_extension_says_what_to_use(tmp_path):
    with pytest.raises(ValueError, match=r'\.png or \.html'):
        flame_graph(COSTS, tmp_path / 'flame.svg')
