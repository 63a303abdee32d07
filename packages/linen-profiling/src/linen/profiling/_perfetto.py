"""``perfetto_trace``: the recorded trace re-drawn with one track per module.

The op events of the profiled program are read from the real trace
(``times.xplane_path``); each is labelled through the program's HLO as in
:func:`profile` and written, in the Chrome trace-event JSON format that
ui.perfetto.dev and ``chrome://tracing`` open, onto the track of its module and
of every enclosing module, so a module's track shows all the work done inside
it. A fusion that did the work of several modules is drawn on each of their
tracks (its ``args`` give each module's share of its FLOPs).
"""

from __future__ import annotations

import json
import os

from linen.profiling._cost_model import label_shares
from linen.profiling._hlo import module_path_from_op_name
from linen.profiling._report import UNLABELLED
from linen.profiling._trace import labelled_module, missing_op_events, op_events_on_lines
from linen.profiling._xplane import read_xspace
from linen.profiling.errors import ProfileNoDeviceOpsError, ProfileTraceUnreadableError

__all__ = ['perfetto_trace']


def _ancestors(path: str) -> list[str]:
    parts = path.split('/') if path else []
    return ['/'.join(parts[: i + 1]) for i in range(len(parts))] or ['']


def perfetto_trace(times, path: str | os.PathLike) -> str:
    """Write the module-track trace of a :func:`profile` result to ``path`` (JSON); return it.

    Raises:
      ProfileTraceUnreadableError: the trace lacks the planes, lines or stats
        op events are read from (it says which).
      ProfileNoDeviceOpsError: the trace has no op events of the profiled program
        (the message lists the programs it has).
      ValueError: ``times`` carries no HLO (it was not made by :func:`profile`).
    """
    if not times.hlo_text:
        raise ValueError(
            'These times carry no HLO to label the trace with; use the result of '
            'linen.profiling.profile(...), which keeps the HLO of the program it ran.'
        )
    with open(times.xplane_path, 'rb') as handle:
        planes = read_xspace(handle.read(), times.xplane_path)
    # The op events profile() timed (host thunks on CPU, the "XLA Ops" line on
    # GPU); a trace without them says what it lacks, as profile() does.
    op_events = op_events_on_lines(planes)
    missing = missing_op_events(planes, [(event, seconds) for *_, event, seconds in op_events])
    if missing is not None:
        raise ProfileTraceUnreadableError(times.xplane_path, missing)
    module = labelled_module(times.hlo_text, times.lowered_hlo_text)
    tracks: dict[str, int] = {}
    events = []
    seen_programs = []
    cache: dict[str, dict[str, float]] = {}
    for plane, line, event, _ in op_events:
        program = event.stats.get('hlo_module', '')
        seen_programs.append(str(program))
        if program != times.program:
            continue
        op = event.stats.get('hlo_op') or event.name
        if op not in cache:
            instruction = module.instruction(op)
            shares = label_shares(module, instruction) if instruction else {'': 1.0}
            paths: dict[str, float] = {}
            for op_name, share in shares.items():
                owner = module_path_from_op_name(op_name)
                paths[owner] = paths.get(owner, 0.0) + share
            cache[op] = paths
        start_us = line.timestamp_ns / 1e3 + event.offset_ps / 1e6
        shares_text = {p or UNLABELLED: round(v, 4) for p, v in cache[op].items()}
        drawn = dict.fromkeys(t for owner in cache[op] for t in _ancestors(owner))
        for track in drawn:
            tid = tracks.setdefault(track, len(tracks) + 1)
            events.append(
                {
                    'name': op,
                    'ph': 'X',
                    'ts': start_us,
                    'dur': event.duration_ps / 1e6,
                    'pid': 1,
                    'tid': tid,
                    'args': {'modules': shares_text, 'plane': plane.name},
                }
            )
    if not events:
        raise ProfileNoDeviceOpsError(times.program, times.xplane_path, seen_programs)
    metadata = [
        {'ph': 'M', 'name': 'process_name', 'pid': 1, 'args': {'name': times.program}},
        *(
            {
                'ph': 'M',
                'name': 'thread_name',
                'pid': 1,
                'tid': tid,
                'args': {'name': name or UNLABELLED},
            }
            for name, tid in tracks.items()
        ),
        *(
            {
                'ph': 'M',
                'name': 'thread_sort_index',
                'pid': 1,
                'tid': tid,
                'args': {'sort_index': tid},
            }
            for tid in tracks.values()
        ),
    ]
    path = os.fspath(path)
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump({'traceEvents': metadata + events, 'displayTimeUnit': 'ns'}, handle)
    return path
