"""Icicle charts: box widths are inclusive shares; PNG and self-contained HTML files."""

import re
from types import SimpleNamespace

import pytest

from linen.profiling import flame_boxes, flame_graph
from linen.profiling._costs import CostRow, ModuleCosts
from linen.profiling._flame import ELLIPSIS, _Axis, _figure


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
    assert 'M/b/c: 10 FLOP (10.0%)' in page
    assert 'Full width: FLOPs 100 FLOP.' in page
    assert '<script' not in page and 'src=' not in page and 'href=' not in page


def test_unknown_extension_says_what_to_use(tmp_path):
    with pytest.raises(ValueError, match=r'\.png or \.html'):
        flame_graph(COSTS, tmp_path / 'flame.svg')


def _times(steps):
    """A report as ``profile`` returns it: seconds summed over ``steps`` steps."""
    rows = [
        SimpleNamespace(path='Net', inclusive_seconds=0.010),
        SimpleNamespace(path='Net/Encoder_0', inclusive_seconds=0.006),
        SimpleNamespace(path='Net/Encoder_0/AVeryLongModuleNameIndeed_0', inclusive_seconds=0.0004),
        SimpleNamespace(path='Net/Encoder_0/Short_0', inclusive_seconds=0.0056),
        SimpleNamespace(path='Net/head', inclusive_seconds=0.001),
    ]
    return SimpleNamespace(rows=rows, steps=steps)


def test_several_steps_are_shown_per_step_in_the_measured_unit(tmp_path):
    boxes = {box.path: box for box in flame_boxes(_times(5), 'seconds')}
    # 10 ms over 5 steps: 2 ms per step; the shares do not change.
    assert boxes['Net'].value == pytest.approx(0.002)
    assert boxes['Net/head'].width == pytest.approx(0.1)
    page = (
        (tmp_path / 'f.html').read_text()
        if flame_graph(_times(5), tmp_path / 'f.html', value='seconds')
        else ''
    )
    assert 'Net: 2 ms per step (100.0%)' in page
    assert 'Net/head: 0.2 ms per step (10.0%)' in page
    assert 'Full width: device time 2 ms per step.' in page
    # One step: no "per step", and the unit follows the size.
    axis = _Axis.of('seconds', flame_boxes(_times(1), 'seconds'), per_step=False)
    assert (axis.unit, axis.label) == ('ms', 'device time (ms)')
    assert axis.text(0.0004) == '0.4 ms'


def _pixels(artist, renderer):
    box = artist.get_window_extent(renderer)
    return box.x0, box.x1, box.y0, box.y1


def test_png_labels_fit_their_boxes_and_never_overlap():
    import matplotlib.pyplot as plt

    boxes = flame_boxes(_times(5), 'seconds')
    figure = _figure(boxes, 'time', _Axis.of('seconds', boxes, per_step=True))
    try:
        renderer = figure.canvas.get_renderer()
        (axes,) = figure.axes
        assert axes.get_xlabel() == 'device time per step (ms)'
        rects = [_pixels(p, renderer) for p in axes.patches]
        labels = [(t.get_text(), _pixels(t, renderer)) for t in axes.texts]
        shown = {text for text, _ in labels}
        assert {'Net', 'Encoder_0', 'Short_0'} <= shown
        # The long name in its 4 % box: elided or left out, never spilling over.
        assert 'AVeryLongModuleNameIndeed_0' not in shown
        assert any(text.endswith(ELLIPSIS) for text in shown) or len(shown) == 4
        for text, (x0, x1, y0, y1) in labels:
            inside = [r for r in rects if r[0] <= x0 and x1 <= r[1] and r[2] <= y0 and y1 <= r[3]]
            assert inside, f'label {text!r} is not inside any box'
        for i, (a, pa) in enumerate(labels):
            for b, pb in labels[i + 1 :]:
                apart = pa[1] <= pb[0] or pb[1] <= pa[0] or pa[3] <= pb[2] or pb[3] <= pa[2]
                assert apart, f'labels {a!r} and {b!r} overlap'
    finally:
        plt.close(figure)


def test_html_labels_fit_their_boxes(tmp_path):
    page = (
        (tmp_path / 'f.html').read_text()
        if flame_graph(_times(5), tmp_path / 'f.html', value='seconds')
        else ''
    )
    drawn = re.findall(
        r'<rect x="[^"]+" y="[^"]+" width="([^"]+)"[^>]*/>(?:<text[^>]*>([^<]*)</text>)?', page
    )
    assert len(drawn) == 5
    for width, label in drawn:
        # 8 px per character is wider than any glyph of a 12 px sans-serif name.
        assert len(label) * 8 <= float(width) - 6, (label, width)
    labels = [label for _, label in drawn]
    assert 'Net' in labels and 'AVeryLongModuleNameIndeed_0' not in labels
