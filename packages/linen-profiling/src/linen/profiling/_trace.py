"""``profile``: a real profiler trace, and time per module path read back from it.

The trace is recorded with ``jax.profiler.trace`` into ``logdir`` (TensorBoard
and XProf open it as they would any other). It is then read back: the device
events of XLA programs (on CPU, thunk events on the ``/host:CPU`` plane; on GPU,
the ``XLA Ops`` lines of the ``/device:GPU:N`` planes) carry the name of the HLO
instruction or fusion they ran and the program name, but not the module label.
(A TPU trace names each op event by its instruction's HLO text and the program by
the ``XLA Modules`` event whose span holds it; :func:`op_events_on_lines` reads
both into the same stats.)
The label is in the optimized HLO of the program, which :func:`profile` compiles
itself (``jitted.lower(...).compile()``, public API) and then runs, so the
instruction names of the trace are those of that HLO; joining the two gives time
per module path. (The trace also stores each program's HLO as a serialized
proto, but JAX has no public API that turns it into text.)
"""

from __future__ import annotations

import bisect
import glob
import os
import re
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from linen.profiling._compile import compile_with_lowering, unoptimized_hlo_text
from linen.profiling._cost_model import label_shares
from linen.profiling._hlo import module_path_from_op_name, parse_hlo_module
from linen.profiling._lost_labels import recover_labels
from linen.profiling._report import format_table
from linen.profiling._tree import PathRows, indented_name, tree_rows
from linen.profiling._xplane import XEvent, XLine, XPlane, read_xspace
from linen.profiling.errors import (
    ProfileNoDeviceOpsError,
    ProfileTraceNotFoundError,
    ProfileTraceUnreadableError,
    ProfileUnmatchedOpsWarning,
)

__all__ = ['ModuleTimes', 'TimeRow', 'profile', 'times_from_xspace']


@dataclass(frozen=True)
class TimeRow:
    """Time spent in one module path, summed over the profiled steps.

    ``seconds`` counts ops labelled exactly with this path, ``inclusive_seconds``
    adds the submodules. Op time is summed over every thread (CPU) or stream
    (GPU) an op ran on, so it can exceed wall time when ops overlap.
    """

    path: str
    seconds: float
    inclusive_seconds: float
    events: int


@dataclass(frozen=True)
class ModuleTimes(PathRows):
    """What :func:`profile` returns: op time per module path, and where the trace is.

    ``hlo_source`` says where the labels came from (``'compiled'``: the HLO of
    the program that ran). A fusion's time is divided among the modules whose
    ops it fused, in proportion to their FLOPs. ``unmatched_ops`` names the op
    events of the program that its HLO does not contain (their time is under
    path ``''``, and a :class:`~linen.profiling.errors.ProfileUnmatchedOpsWarning`
    says so).
    """

    _report_name = 'profile'

    rows: tuple[TimeRow, ...]
    steps: int
    total_seconds: float
    logdir: str
    xplane_path: str
    program: str
    hlo_source: str
    unmatched_ops: tuple[str, ...] = ()
    hlo_text: str = ''
    lowered_hlo_text: str = ''

    def __str__(self) -> str:
        total = self.total_seconds or 1.0
        steps = max(self.steps, 1)
        body = []
        for row in self.rows:
            name = indented_name(row.path)
            body.append(
                [
                    name,
                    f'{1e3 * row.inclusive_seconds / steps:.3f}',
                    f'{1e3 * row.seconds / steps:.3f}',
                    f'{100.0 * row.inclusive_seconds / total:.1f}%',
                    str(row.events),
                ]
            )
        body.append(['total', f'{1e3 * self.total_seconds / steps:.3f}', '', '100.0%', ''])
        return format_table(
            f'Time per module ({self.program}, {self.steps} steps, trace in {self.logdir})',
            ['module', 'ms/step', 'own ms/step', '% time', 'op events'],
            body,
        )


def _op_events(planes: list[XPlane]) -> list[tuple[XEvent, float]]:
    """XLA op events with their self time in seconds (nested events subtracted)."""
    return [(event, seconds) for _, _, event, seconds in op_events_on_lines(planes)]


_INSTRUCTION_TEXT = re.compile(r'^%?([\w.\-]+) = ')
_PROGRAM_ID = re.compile(r'\(\d+\)$')


def _name_tpu_programs(plane: XPlane) -> None:
    """Give a TPU plane's op events the ``hlo_op`` and ``hlo_module`` stats a GPU's carry.

    A TPU trace names an ``XLA Ops`` event by its instruction's HLO text
    (``%fusion = f32[] fusion(...), kind=kOutput, ...``) and leaves out the
    program; the program is the ``XLA Modules`` event whose span holds the op,
    named ``jit_f(<program id>)``.
    """
    lines = {line.name: line for line in plane.lines}
    ops, programs = lines.get('XLA Ops'), lines.get('XLA Modules')
    if ops is None or all('hlo_module' in event.stats for event in ops.events):
        return
    spans = sorted(
        (
            programs.timestamp_ns * 1000 + event.offset_ps,
            programs.timestamp_ns * 1000 + event.offset_ps + event.duration_ps,
            _PROGRAM_ID.sub('', event.name),
        )
        for event in (programs.events if programs is not None else ())
    )
    starts = [start for start, _, _ in spans]
    for event in ops.events:
        if 'hlo_op' not in event.stats:
            match = _INSTRUCTION_TEXT.match(event.name)
            if match is not None:
                event.stats['hlo_op'] = match.group(1)
        if 'hlo_module' not in event.stats:
            at = ops.timestamp_ns * 1000 + event.offset_ps
            index = bisect.bisect_right(starts, at) - 1
            if index >= 0 and at < spans[index][1]:
                event.stats['hlo_module'] = spans[index][2]


def op_events_on_lines(planes: list[XPlane]) -> list[tuple[XPlane, XLine, XEvent, float]]:
    """``(plane, line, event, self seconds)`` of every XLA op event.

    Host planes (CPU): events with an ``hlo_op`` stat, on any line. Device
    planes (GPU, TPU): the events of the ``XLA Ops`` line, named after the HLO
    instruction, or any line's events with an ``hlo_op`` stat, except a TPU's
    ``Async XLA Ops`` (spans of asynchronous copies, which overlap the ops that
    run meanwhile).
    """
    result = []
    for plane in planes:
        is_device = plane.name.startswith('/device:')
        if is_device:
            _name_tpu_programs(plane)
        for line in plane.lines:
            if is_device and line.name == 'Async XLA Ops':
                continue
            if (
                is_device
                and line.name not in ('XLA Ops', 'XLA Modules')
                and not any('hlo_op' in event.stats for event in line.events)
            ):
                continue
            ops = [
                event
                for event in line.events
                if 'hlo_op' in event.stats or (is_device and line.name == 'XLA Ops')
            ]
            ops.sort(key=lambda event: (event.offset_ps, -event.duration_ps))
            # An op that encloses others on the same line (a while loop's thunk)
            # keeps only the time not spent in them.
            child_time = [0] * len(ops)
            stack: list[int] = []
            for index, event in enumerate(ops):
                while stack and ops[stack[-1]].offset_ps + ops[stack[-1]].duration_ps <= (
                    event.offset_ps
                ):
                    stack.pop()
                if stack:
                    child_time[stack[-1]] += event.duration_ps
                stack.append(index)
            for index, event in enumerate(ops):
                seconds = max(event.duration_ps - child_time[index], 0) * 1e-12
                result.append((plane, line, event, seconds))
    return result


def missing_op_events(planes: list[XPlane], events: list[tuple[XEvent, float]]) -> str | None:
    """What the trace lacks for op times, or ``None`` when it has op events with programs."""
    if events:
        if any('hlo_module' in event.stats for event, _ in events):
            return None
        return (
            f'its {len(events)} op event(s) carry no "hlo_module" stat, so no event can be '
            f'matched to the profiled program'
        )
    devices = [plane for plane in planes if plane.name.startswith('/device:')]
    if devices:
        described = '; '.join(
            f'{plane.name} has lines {[line.name for line in plane.lines]}' for plane in devices[:4]
        )
        return f'no device plane has an "XLA Ops" line ({described})'
    names = [plane.name for plane in planes]
    return (
        f'it has no "/device:..." plane and no event with an "hlo_op" stat on a host plane '
        f'(planes: {names})'
    )


def times_from_xspace(
    data: bytes,
    program: str,
    *,
    steps: int,
    hlo_text: str,
    logdir: str = '',
    xplane_path: str = '',
    lowered_hlo_text: str = '',
) -> ModuleTimes:
    """Time per module path of ``program`` (an HLO module name) in a serialized XSpace.

    ``hlo_text`` is the optimized HLO of the program that ran
    (``compiled.as_text()``); its ``op_name`` labels give the module paths.
    ``lowered_hlo_text``, the same program before optimization, gives back the
    labels XLA dropped (see ``linen.profiling._lost_labels``).

    Raises:
      ProfileTraceUnreadableError: the trace has no op events this reader
        knows (no ``XLA Ops`` line on a device plane, no ``hlo_op`` events on
        a host plane) or its op events name no program; the message says what
        is missing.
      ProfileNoDeviceOpsError: op events exist, but none of ``program``.
    """
    planes = read_xspace(data, xplane_path)
    events = _op_events(planes)
    missing = missing_op_events(planes, events)
    if missing is not None:
        raise ProfileTraceUnreadableError(xplane_path, missing)
    module = labelled_module(hlo_text, lowered_hlo_text)
    unmatched: dict[str, None] = {}
    own: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    seen_programs = []
    matched = 0
    shares_cache: dict[str, dict[str, float]] = {}
    for event, seconds in events:
        module_name = event.stats.get('hlo_module', '')
        seen_programs.append(str(module_name))
        if module_name != program:
            continue
        op = event.stats.get('hlo_op') or event.name
        if op not in shares_cache:
            instruction = module.instruction(op)
            if instruction is None:
                unmatched[op] = None
            shares_cache[op] = (
                label_shares(module, instruction) if instruction is not None else {'': 1.0}
            )
        for op_name, share in shares_cache[op].items():
            path = module_path_from_op_name(op_name)
            own.setdefault(path, [0.0])[0] += seconds * share
            counts[path] = counts.get(path, 0) + 1
        matched += 1
    if not matched:
        raise ProfileNoDeviceOpsError(program, xplane_path, seen_programs)
    if unmatched:
        warnings.warn(ProfileUnmatchedOpsWarning(program, tuple(unmatched)), stacklevel=2)
    rows = tuple(
        TimeRow(path=path, seconds=mine[0], inclusive_seconds=total[0], events=counts.get(path, 0))
        for path, mine, total in tree_rows(own, 1)
    )
    return ModuleTimes(
        rows=rows,
        steps=steps,
        total_seconds=sum(values[0] for values in own.values()),
        logdir=logdir,
        xplane_path=xplane_path,
        program=program,
        hlo_source='compiled',
        unmatched_ops=tuple(unmatched),
        hlo_text=hlo_text,
        lowered_hlo_text=lowered_hlo_text,
    )


def labelled_module(hlo_text: str, lowered_hlo_text: str = ''):
    """The optimized HLO, parsed, with the labels XLA dropped recovered."""
    lowered = parse_hlo_module(lowered_hlo_text) if lowered_hlo_text else None
    return recover_labels(parse_hlo_module(hlo_text), lowered)


def _newest_xplane(logdir: str, after: float) -> str:
    paths = glob.glob(os.path.join(logdir, 'plugins', 'profile', '*', '*.xplane.pb'))
    paths = [path for path in paths if os.path.getmtime(path) >= after - 1.0]
    if not paths:
        raise ProfileTraceNotFoundError(logdir)
    return max(paths, key=os.path.getmtime)


def profile(
    fn: Callable,
    *args: Any,
    steps: int = 5,
    logdir: str | os.PathLike | None = None,
    warmup: int = 1,
    print_table: bool = True,
    **kwargs: Any,
) -> ModuleTimes:
    """Run ``fn`` under the JAX profiler and report time per module path.

    ``fn`` is jitted (unless it already is), run ``warmup`` times untraced so that
    compilation stays out of the trace, then ``steps`` times inside
    ``jax.profiler.trace(logdir)``, each step marked with a
    ``StepTraceAnnotation``. The trace stays in ``logdir`` for TensorBoard or
    XProf (``tensorboard --logdir LOGDIR``); the table is read back from it.

    Args:
      fn: the function to profile, e.g. ``jax.jit(lambda v, x: model.apply(v, x))``.
      *args: its arguments.
      steps: how many traced calls.
      logdir: where the trace goes (a new temporary directory if ``None``).
      warmup: untraced calls before tracing.
      print_table: print the table as well as returning it.
      **kwargs: keyword arguments of ``fn``.

    Returns:
      A :class:`ModuleTimes` (``str()`` of it is the table).

    Raises:
      ProfileTraceNotFoundError: the profiler wrote no trace under ``logdir``.
      ProfileTraceUnreadableError: the trace lacks the planes, lines or stats op
        times are read from (it says which).
      ProfileNoDeviceOpsError: the trace has no op events of ``fn``'s program.
    """
    import time

    import jax

    # The compiled object itself runs, so the trace's instruction names are
    # those of the HLO read here.
    lowered, compiled = compile_with_lowering(fn, args, kwargs)
    compiled_text = compiled.as_text()
    program = parse_hlo_module(compiled_text).name
    logdir = os.fspath(logdir) if logdir is not None else tempfile.mkdtemp(prefix='linen-profile-')
    for _ in range(warmup):
        jax.block_until_ready(compiled(*args, **kwargs))
    started = time.time()
    with jax.profiler.trace(logdir):
        for step in range(steps):
            with jax.profiler.StepTraceAnnotation('linen_profile', step_num=step):
                jax.block_until_ready(compiled(*args, **kwargs))
    xplane_path = _newest_xplane(logdir, started)
    with open(xplane_path, 'rb') as handle:
        data = handle.read()
    times = times_from_xspace(
        data,
        program,
        steps=steps,
        logdir=logdir,
        xplane_path=xplane_path,
        hlo_text=compiled_text,
        lowered_hlo_text=unoptimized_hlo_text(lowered),
    )
    if print_table:
        print(times)
    return times
