import struct

from linen.profiling._xplane import read_xspace


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _int(number: int, value: int) -> bytes:
    return _key(number, 0) + _varint(value)


def _bytes(number: int, value: bytes | str) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return _key(number, 2) + _varint(len(raw)) + raw


def _double(number: int, value: float) -> bytes:
    return _key(number, 1) + struct.pack('<d', value)


def test_reads_planes_lines_events_stats_and_event_metadata():
    # Stat metadata 1 'hlo_op', 2 'program_id', 3 'Hlo Proto', 4 'ratio'.
    stat_md = b''.join(
        _bytes(5, _int(1, key) + _bytes(2, _int(1, key) + _bytes(2, name)))
        for key, name in ((1, 'hlo_op'), (2, 'program_id'), (3, 'Hlo Proto'), (4, 'ratio'))
    )
    event_md = _bytes(4, _int(1, 7) + _bytes(2, _int(1, 7) + _bytes(2, 'fusion.3')))
    module_md = _bytes(
        4,
        _int(1, 9)
        + _bytes(
            2, _int(1, 9) + _bytes(2, 'jit_f(4)') + _bytes(5, _int(1, 3) + _bytes(6, b'\x00\xff'))
        ),
    )
    event = (
        _int(1, 7)
        + _int(2, 1500)
        + _int(3, 2500)
        + _bytes(4, _int(1, 1) + _bytes(5, 'fusion.3'))
        + _bytes(4, _int(1, 2) + _int(4, -3))
        + _bytes(4, _int(1, 4) + _double(2, 0.5))
    )
    line = _bytes(2, 'worker') + _int(3, 123) + _bytes(4, event)
    plane = (
        _bytes(2, '/host:CPU')
        + stat_md
        + event_md
        + module_md
        + _bytes(3, line)
        + _bytes(6, _int(1, 2) + _int(3, 11))
    )
    (decoded,) = read_xspace(_bytes(1, plane))
    assert decoded.name == '/host:CPU'
    assert decoded.stats == {'program_id': 11}
    assert decoded.event_metadata == {'jit_f(4)': {'Hlo Proto': b'\x00\xff'}}
    (decoded_line,) = decoded.lines
    assert (decoded_line.name, decoded_line.timestamp_ns) == ('worker', 123)
    (decoded_event,) = decoded_line.events
    assert decoded_event.name == 'fusion.3'
    assert (decoded_event.offset_ps, decoded_event.duration_ps) == (1500, 2500)
    assert decoded_event.stats == {'hlo_op': 'fusion.3', 'program_id': -3, 'ratio': 0.5}
