"""A fixed-seed slice of the differential fuzzer, run by CI.

Program ``i`` of seed ``SLICE_SEED`` is always the same program, so this is a fixed
set of generated programs; each must show no difference from Flax beyond the
known findings of ``known.py`` (where the features that provoke a recorded
difference are listed, with the FINDINGS.md entry that explains it). The slice is
split in chunks so that pytest-xdist spreads it over the cores.

Cost, measured on 2026-12-02 over the first 300 programs: 285 CPU-seconds with JAX
0.12 and Flax 0.12.12 (0.95 s a program, both libraries, pytest included) and about
420 with JAX 0.10 and Flax 0.12.8 (1.4 s). The slice keeps 250 of them: about 2 minutes
(newest JAX) and 3 minutes (oldest) on two otherwise idle cores with ``-n 2``;
chunks of 10 programs keep the two workers' shares even.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integration_tests.fuzz.campaign import program_for
from integration_tests.fuzz.known import known_finding
from integration_tests.fuzz.runner import differences

SLICE_SEED = 'ci'
SLICE_PROGRAMS = 250
CHUNK = 10


@pytest.mark.slow
@pytest.mark.flax
@pytest.mark.parametrize('start', range(0, SLICE_PROGRAMS, CHUNK))
def test_generated_programs_match_flax(start):
    problems = []
    for index in range(start, start + CHUNK):
        program = program_for(SLICE_SEED, index)
        source = program.source()
        features = program.features()
        unknown = [d for d in differences(source) if known_finding(d, features) is None]
        if unknown:
            shown = '\n  '.join(map(str, unknown[:5]))
            problems.append(f'program {index} of seed {SLICE_SEED!r}:\n  {shown}\n{source}')
    assert not problems, '\n\n'.join(problems)
