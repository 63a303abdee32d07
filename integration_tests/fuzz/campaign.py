"""A fuzzing campaign: draw programs from a seed, compare, shrink and record what differs.

Program ``i`` of seed ``s`` is drawn from ``random.Random(f'{s}:{i}')``, so any
program of a run can be drawn again alone. For each program the earliest stage
whose difference is not a known finding (``known.py``) is shrunk and, when its
class is new, written out as a reproducer; later differences of the same program
are usually its consequences and are only counted.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jax

from integration_tests.fuzz.compare import Difference
from integration_tests.fuzz.known import known_finding
from integration_tests.fuzz.program import Program, draw_program
from integration_tests.fuzz.reproduce import existing_classes, write_reproducer
from integration_tests.fuzz.runner import STAGE_NAMES, differences
from integration_tests.fuzz.shrink import shrink

# Shrinking costs dozens of runs: after this many shrunk programs with the same
# (stage, kind) in one run, further ones are classed unshrunk.
SHRINK_PER_SIGNATURE = 3
# Compiled programs of finished fuzz programs are never reused; dropping JAX's caches
# now and then keeps a long run's memory flat.
CLEAR_CACHES_EVERY = 100


@dataclass
class Found:
    """A new difference: the program that showed it and its shrunk form."""

    index: int
    diff: Difference
    program: Program
    shrunk: Program | None = None
    klass: str = ''
    reproducer: Path | None = None


@dataclass
class Report:
    seed: str
    programs: int = 0
    seconds: float = 0.0
    clean: int = 0
    known: Counter = field(default_factory=Counter)
    new: list[Found] = field(default_factory=list)
    classes: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        lines = [
            f'seed {self.seed}: {self.programs} programs in {self.seconds:.0f} s, '
            f'{self.clean} without any difference, {len(self.new)} with a new one '
            f'({len(self.classes)} classes), known findings: {dict(self.known) or "none"}'
        ]
        for klass, count in self.classes.most_common():
            lines.append(f'  {count:5d}  {klass}')
        return '\n'.join(lines)


def program_for(seed: str | int, index: int) -> Program:
    return draw_program(random.Random(f'{seed}:{index}'), f'seed {seed}, program {index}')


def class_of(program: Program, diff: Difference) -> str:
    """The class of a difference: stage, kind and the features of its shrunk program."""
    features = sorted(f for f in program.features() if not f.startswith('rank.'))
    return f'{diff.stage}/{diff.kind}/' + '+'.join(features)


def primary(diffs: list[Difference], features: set[str], report: Report | None = None):
    """The earliest unknown difference (counting the known ones into ``report``)."""
    unknown = []
    for d in diffs:
        finding = known_finding(d, features)
        if finding is None:
            unknown.append(d)
        elif report is not None:
            report.known[finding.id] += 1
    unknown.sort(key=lambda d: STAGE_NAMES.index(d.stage))
    return unknown[0] if unknown else None


def run(
    seed: str | int,
    programs: int | None = None,
    minutes: float | None = None,
    do_shrink: bool = True,
    out: Path | None = None,
    on_program: Callable[[int, Report], None] | None = None,
) -> Report:
    """Compare programs ``0, 1, ...`` of ``seed`` until ``programs`` or ``minutes`` run out."""
    report = Report(str(seed))
    start = time.monotonic()
    seen = existing_classes(out) if out is not None else set()
    shrunk_before: Counter = Counter()
    index = 0
    while True:
        if programs is not None and index >= programs:
            break
        if minutes is not None and time.monotonic() - start > minutes * 60:
            break
        program = program_for(seed, index)
        features = program.features()
        diffs = differences(program.source())
        report.programs += 1
        report.clean += not diffs
        first = primary(diffs, features, report)
        if first is not None:
            found = Found(index, first, program)
            target = program
            shrunk_before[first.signature()] += 1
            if do_shrink and shrunk_before[first.signature()] <= SHRINK_PER_SIGNATURE:
                target = found.shrunk = shrink(program, first.signature())
            found.klass = class_of(target, first)
            report.classes[found.klass] += 1
            if out is not None and found.klass not in seen:
                seen.add(found.klass)
                found.reproducer = write_reproducer(
                    found.klass, first, target.source(), f'seed {seed}, program {index}', out
                )
            report.new.append(found)
        index += 1
        if index % CLEAR_CACHES_EVERY == 0:
            jax.clear_caches()
        report.seconds = time.monotonic() - start
        if on_program is not None:
            on_program(index, report)
    report.seconds = time.monotonic() - start
    return report


__all__ = ['Found', 'Report', 'class_of', 'primary', 'program_for', 'run']
