"""A small reader for the ``*.xplane.pb`` files that ``jax.profiler`` writes.

``jax.profiler.ProfileData`` exposes planes, lines, events and plane stats, but
not a plane's *event metadata*, which is where the profiler stores the HLO of
every module it saw (``/host:metadata`` plane, one entry per module, stat
``hlo_proto``). On CPU that HLO is the only place the trace keeps the
``op_name`` labels: device events name XLA instructions and fusions only. So we
read the protobuf wire format directly. The message layout is the public
``tsl/profiler/protobuf/xplane.proto``; only the fields used here are decoded.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    'XEvent',
    'XLine',
    'XPlane',
    'read_xspace',
]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """Yield ``(field_number, wire_type, value)``; length-delimited values as bytes."""
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value = buf[pos : pos + 8]
            pos += 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value = buf[pos : pos + size]
            pos += size
        elif wire == 5:
            value = buf[pos : pos + 4]
            pos += 4
        else:
            raise ValueError(f'unsupported protobuf wire type {wire} (field {number})')
        yield number, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass
class XEvent:
    """One timed event: ``name`` from its metadata, ``stats`` by stat name."""

    name: str
    offset_ps: int
    duration_ps: int
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class XLine:
    name: str
    timestamp_ns: int
    events: list[XEvent] = field(default_factory=list)


@dataclass
class XPlane:
    """A plane with its lines, its plane-level stats and its event metadata.

    ``event_metadata`` maps a metadata name to that metadata's stats (for the
    ``/host:metadata`` plane: module name -> ``{'hlo_proto': bytes}``).
    """

    name: str
    lines: list[XLine] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    event_metadata: dict[str, dict[str, Any]] = field(default_factory=dict)


def _stat(buf: bytes, stat_names: dict[int, str]) -> tuple[str, Any]:
    metadata_id = 0
    value: Any = None
    ref = False
    for number, _, raw in _fields(buf):
        if number == 1:
            metadata_id = raw
        elif number == 2:
            value = struct.unpack('<d', raw)[0]
        elif number == 3:
            value = raw
        elif number == 4:
            value = _signed(raw)
        elif number == 5:
            value = raw.decode('utf-8', 'replace')
        elif number == 6:
            value = bytes(raw)
        elif number == 7:
            value, ref = raw, True
    if ref:
        # A ref_value points at a stat metadata whose name is the string value.
        value = stat_names.get(value, value)
    return stat_names.get(metadata_id, str(metadata_id)), value


def _map_entry(buf: bytes) -> tuple[int, bytes]:
    key, value = 0, b''
    for number, _, raw in _fields(buf):
        if number == 1:
            key = raw
        elif number == 2:
            value = raw
    return key, value


def _plane(buf: bytes) -> XPlane:
    name = ''
    raw_lines: list[bytes] = []
    raw_stats: list[bytes] = []
    raw_event_md: dict[int, bytes] = {}
    stat_names: dict[int, str] = {}
    for number, _, raw in _fields(buf):
        if number == 2:
            name = raw.decode('utf-8', 'replace')
        elif number == 3:
            raw_lines.append(raw)
        elif number == 4:
            key, value = _map_entry(raw)
            raw_event_md[key] = value
        elif number == 5:
            key, value = _map_entry(raw)
            for n, _, r in _fields(value):
                if n == 2:
                    stat_names[key] = r.decode('utf-8', 'replace')
        elif number == 6:
            raw_stats.append(raw)
    plane = XPlane(name=name)
    plane.stats = dict(_stat(s, stat_names) for s in raw_stats)
    event_names: dict[int, str] = {}
    for key, value in raw_event_md.items():
        md_name, md_stats = '', {}
        for n, _, r in _fields(value):
            if n == 2:
                md_name = r.decode('utf-8', 'replace')
            elif n == 5:
                stat_name, stat_value = _stat(r, stat_names)
                md_stats[stat_name] = stat_value
        event_names[key] = md_name
        if md_stats:
            plane.event_metadata.setdefault(md_name, {}).update(md_stats)
    for raw_line in raw_lines:
        line = XLine(name='', timestamp_ns=0)
        for n, _, r in _fields(raw_line):
            if n == 2:
                line.name = r.decode('utf-8', 'replace')
            elif n == 3:
                line.timestamp_ns = _signed(r)
            elif n == 4:
                line.events.append(_event(r, event_names, stat_names))
        plane.lines.append(line)
    return plane


def _event(buf: bytes, event_names: dict[int, str], stat_names: dict[int, str]) -> XEvent:
    event = XEvent(name='', offset_ps=0, duration_ps=0)
    for number, _, raw in _fields(buf):
        if number == 1:
            event.name = event_names.get(raw, str(raw))
        elif number == 2:
            event.offset_ps = _signed(raw)
        elif number == 3:
            event.duration_ps = _signed(raw)
        elif number == 4:
            stat_name, value = _stat(raw, stat_names)
            event.stats[stat_name] = value
    return event


def read_xspace(data: bytes, path: str = '') -> list[XPlane]:
    """Decode a serialized ``XSpace`` into its planes.

    Raises:
      ProfileTraceUnreadableError: ``data`` is not a serialized ``XSpace``
        (truncated, or another file); ``path`` names it in the message.
    """
    from linen.profiling.errors import ProfileTraceUnreadableError

    try:
        return [_plane(raw) for number, _, raw in _fields(data) if number == 1]
    except (IndexError, ValueError, struct.error) as error:
        raise ProfileTraceUnreadableError(
            path,
            f'the data is not a serialized XSpace protobuf (truncated or another file: {error})',
        ) from error
