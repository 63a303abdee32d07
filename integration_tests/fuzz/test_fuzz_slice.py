"""A fixed-seed slice of the differential fuzzer, run by CI.

Program ``i`` of seed ``SLICE_SEED`` is always the same program, so this is a fixed
set of generated programs; each must show no difference from Flax beyond the
known findings of ``known.py`` (where the features that provoke a recorded
difference are listed, with the FINDINGS.md entry that explains it). The slice is
split in chunks so that pytest-xdist spreads it over the cores.

Cost: on 2026-12-02, over the first 300 programs of the grammar of then, 0.95
CPU-seconds a program with JAX 0.12 and Flax 0.12.12 and 1.4 with JAX 0.10 and Flax
0.12.8, which sized the slice at 250 programs. The grammar has since drawn the costly
families (recurrent cells, attention with caches, ``nn.switch``, dict fields) and on
2026-12-06 the 250 it draws now took 908 seconds in the suite at JAX 0.12 (3.6 a
program, beside another job on two cores; a
program with an LSTM under ``nn.jit`` and ``nn.switch`` alone took 29): the largest
share of the suite, twice over in CI (one run per JAX end), which took 48 minutes. The
slice keeps the first 120 (363 of those seconds; with JAX 0.10 and Flax 0.12.8 they
took 915, 490 s of wall time on two cores beside other jobs), 12 chunks of 10 that
keep the two workers' shares even. CI still took 48 minutes (2,906 s) with it: at the
oldest JAX end (``nox -s tests``' Python 3.11 session) the slice is the first 40
programs (``LINEN_FUZZ_SLICE_PROGRAMS``, set there by the noxfile), where JAX 0.10 runs
them 1.5-2.5 times slower than 0.12 (program 50 alone: 54 CPU-s against 32); the
newest end runs all 120. On 2026-12-07 the runner gained the ``capture``, ``intercept``
and ``penalty`` stages and the grammar a gradient penalty and context queries: the 120
took 312 s in one process beside a full suite run (JAX 0.12), the 40 at JAX 0.10 214 s
(reproducers included). CI's next runs took 2,777 s and 2,822 s, over its 45-minute
aim, so on 2026-12-07 the newest end's slice became the first 80 programs (the chunks
cut took 24-25 s each there). Campaigns of thousands of programs (``nox -s fuzz``, RUNS.md,
at both ends) are where the fuzzer searches; this slice is the regression net.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integration_tests.fuzz.campaign import program_for
from integration_tests.fuzz.known import known_finding
from integration_tests.fuzz.runner import differences

SLICE_SEED = 'ci'
SLICE_PROGRAMS = int(os.environ.get('LINEN_FUZZ_SLICE_PROGRAMS', '80'))
CHUNK = 10


@pytest.mark.slow
@pytest.mark.flax
@pytest.mark.usefixtures('shared_compilations')  # integration_tests/conftest.py
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
