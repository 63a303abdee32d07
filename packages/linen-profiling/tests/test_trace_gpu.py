"""The GPU trace path, on traces built here in the documented XPlane layout (no GPU needed).

A GPU trace keeps op events on the ``XLA Ops`` line of each ``/device:GPU:N``
plane, named after the HLO instruction, with an ``hlo_module`` stat. A trace
without them must fail saying what is missing, never give an empty table.
"""

import pickle
from pathlib import Path

import pytest

from linen.profiling import label_scope
from linen.profiling._trace import times_from_xspace
from linen.profiling.errors import ProfileTraceUnreadableError

HLO = """HloModule jit_f, entry_computation_layout={(f32[4,4]{1,0})->f32[4,4]{1,0}}

ENTRY %main (p0: f32[4,4]) -> f32[4,4] {
  %p0 = f32[4,4]{1,0} parameter(0)
  %dot.1 = f32[4,4]{1,0} dot(%p0, %p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/GpuNet/Dense_0/dot_general"}
  ROOT %tanh.2 = f32[4,4]{1,0} tanh(%dot.1), metadata={op_name="jit(f)/GpuNet/Dense_1/tanh"}
}
"""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | 0x80 if value else byte)
        if not value:
            return bytes(out)


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _bytes(number: int, value: bytes | str) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def _plane(name: str, lines: dict[str, list[tuple[str, int, int]]], stats: bool = True) -> bytes:
    """A plane; ``lines``: line name -> [(event name, offset ps, duration ps)]."""
    # Stat metadata 1: 'hlo_module'. Event metadata: one id per event name.
    body = _bytes(2, name) + _bytes(5, _int(1, 1) + _bytes(2, _int(1, 1) + _bytes(2, 'hlo_module')))
    ids: dict[str, int] = {}
    for events in lines.values():
        for event_name, _, _ in events:
            ids.setdefault(event_name, len(ids) + 1)
    for event_name, key in ids.items():
        body += _bytes(4, _int(1, key) + _bytes(2, _int(1, key) + _bytes(2, event_name)))
    for line_name, events in lines.items():
        line = _bytes(2, line_name)
        for event_name, offset, duration in events:
            stat = _bytes(4, _int(1, 1) + _bytes(5, 'jit_f')) if stats else b''
            line += _bytes(4, _int(1, ids[event_name]) + _int(2, offset) + _int(3, duration) + stat)
        body += _bytes(3, line)
    return _bytes(1, body)


def _emit_labels():
    with label_scope('GpuNet'):
        with label_scope('Dense_0'):
            pass
        with label_scope('Dense_1'):
            pass


def test_gpu_xla_ops_line_gives_time_per_module():
    _emit_labels()
    trace = _plane('/host:metadata', {}) + _plane(
        '/device:GPU:0',
        {
            'XLA Modules': [('jit_f', 0, 4000)],
            'XLA Ops': [('dot.1', 0, 3000), ('tanh.2', 3000, 1000)],
        },
    )
    times = times_from_xspace(trace, 'jit_f', steps=1, hlo_text=HLO)
    assert times['GpuNet/Dense_0'].seconds == pytest.approx(3e-9)
    assert times['GpuNet/Dense_1'].seconds == pytest.approx(1e-9)
    assert times['GpuNet'].inclusive_seconds == pytest.approx(4e-9)


@pytest.mark.parametrize(
    ('trace', 'missing'),
    [
        (  # device tracing on, but no per-op line (only module and stream lines)
            _plane('/device:GPU:0', {'XLA Modules': [('jit_f', 0, 4000)], 'Stream #7': []}),
            'no device plane has an "XLA Ops" line (/device:GPU:0 has lines [\'XLA Modules\'',
        ),
        (  # op events that name no program
            _plane('/device:GPU:0', {'XLA Ops': [('dot.1', 0, 3000)]}, stats=False),
            'carry no "hlo_module" stat',
        ),
        (  # host-side trace only
            _plane('/host:metadata', {}) + _plane('/host:python', {'python': []}),
            'no "/device:..." plane and no event with an "hlo_op" stat on a host plane '
            "(planes: ['/host:metadata', '/host:python'])",
        ),
    ],
    ids=['no-xla-ops-line', 'no-hlo-module-stat', 'no-device-plane'],
)
def test_unreadable_trace_says_what_is_missing(trace, missing):
    with pytest.raises(ProfileTraceUnreadableError) as raised:
        times_from_xspace(trace, 'jit_f', steps=1, hlo_text=HLO, xplane_path='/t/x.xplane.pb')
    assert missing in str(raised.value)
    assert "'/t/x.xplane.pb'" in str(raised.value)
    copy = pickle.loads(pickle.dumps(raised.value))
    assert str(copy) == str(raised.value)


@pytest.mark.parametrize('data', [b'\x0a\xff\xff', b'\x0f\x00'], ids=['truncated', 'bad-wire-type'])
def test_bytes_that_are_no_xspace_say_so(data):
    with pytest.raises(ProfileTraceUnreadableError, match='not a serialized XSpace protobuf'):
        times_from_xspace(data, 'jit_f', steps=1, hlo_text=HLO, xplane_path='/t/x.xplane.pb')


def _gpu_times(tmp_path, trace: bytes):
    from linen.profiling._trace import ModuleTimes

    path = tmp_path / 'gpu.xplane.pb'
    path.write_bytes(trace)
    return ModuleTimes(
        rows=(),
        steps=1,
        total_seconds=0.0,
        logdir=str(tmp_path),
        xplane_path=str(path),
        program='jit_f',
        hlo_source='compiled',
        hlo_text=HLO,
    )


def test_perfetto_reads_the_gpu_xla_ops_line(tmp_path):
    import json

    from linen.profiling import perfetto_trace

    _emit_labels()
    trace = _plane(
        '/device:GPU:0', {'XLA Ops': [('dot.1', 0, 3_000_000), ('tanh.2', 3_000_000, 1_000_000)]}
    )
    out = perfetto_trace(_gpu_times(tmp_path, trace), tmp_path / 'gpu.json')
    events = json.loads(Path(out).read_text())['traceEvents']
    names = {e['tid']: e['args']['name'] for e in events if e.get('name') == 'thread_name'}
    spans = [(names[e['tid']], e['name'], e['dur']) for e in events if e['ph'] == 'X']
    # Each op on its module's track and on the enclosing module's (durations in us).
    assert sorted(spans) == [
        ('GpuNet', 'dot.1', 3.0),
        ('GpuNet', 'tanh.2', 1.0),
        ('GpuNet/Dense_0', 'dot.1', 3.0),
        ('GpuNet/Dense_1', 'tanh.2', 1.0),
    ]


def test_perfetto_of_an_unreadable_gpu_trace_says_what_is_missing(tmp_path):
    from linen.profiling import perfetto_trace

    trace = _plane('/device:GPU:0', {'XLA Modules': [('jit_f', 0, 4000)]})
    with pytest.raises(ProfileTraceUnreadableError, match='no device plane has an "XLA Ops" line'):
        perfetto_trace(_gpu_times(tmp_path, trace), tmp_path / 'gpu.json')
