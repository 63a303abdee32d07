"""Every reproducer the fuzzers ever wrote, as a regression test.

A reproducer of an open finding (listed in ``known.py``) is expected to fail,
strictly: once the fix lands it passes, the strict xfail turns red, and the fix's
author removes the finding from ``known.py`` (and marks it fixed in FINDINGS.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integration_tests.fuzz.known import KNOWN, open_reproducers
from integration_tests.fuzz.reproduce import REPRODUCERS, load, remaining

FILES = sorted(REPRODUCERS.glob('*.py'))
OPEN = open_reproducers()


def _param(path: Path):
    finding = OPEN.get(path.stem)
    if finding is None:
        return pytest.param(path, id=path.stem)
    reason = f'FINDINGS {finding.id}: {finding.title}'
    return pytest.param(path, id=path.stem, marks=pytest.mark.xfail(strict=True, reason=reason))


@pytest.mark.flax
@pytest.mark.usefixtures('shared_compilations')  # integration_tests/conftest.py
@pytest.mark.parametrize('path', [_param(p) for p in FILES])
def test_reproducer_shows_no_difference(path):
    found = remaining(load(path))
    assert not found, '\n'.join(found)


def test_every_open_finding_has_its_reproducers():
    names = {p.stem for p in FILES}
    missing = {f.id: [r for r in f.reproducers if r not in names] for f in KNOWN}
    assert not {k: v for k, v in missing.items() if v}
    findings = (Path(__file__).parent / 'FINDINGS.md').read_text()
    for finding in KNOWN:
        assert f'## {finding.id} ' in findings, f'{finding.id} has no entry in FINDINGS.md'
