"""Differences already recorded in FINDINGS.md, in one place.

A difference the fuzzer finds is *known* when a finding here has its stage and kind
and the program has every feature the finding lists; known differences do not fail
the CI slice and get no new reproducer. Each finding names its reproducers, which
``test_reproducers.py`` marks ``xfail(strict=True)`` until the fix lands: when it
does, the reproducer passes, the strict xfail fails, and the entry is removed here
(and marked fixed in FINDINGS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from integration_tests.fuzz.compare import Difference


@dataclass(frozen=True)
class KnownFinding:
    id: str  # the heading in FINDINGS.md
    title: str
    stage: str
    kind: str
    # A program shows it only when it has all of these; None: the generator never
    # writes such a program (a hand-written reproducer shows it).
    features: frozenset[str] | None
    reproducers: tuple[str, ...] = ()

    def matches(self, diff: Difference, features: set[str]) -> bool:
        if self.features is None:
            return False
        return (diff.stage, diff.kind) == (self.stage, self.kind) and self.features <= features


KNOWN: tuple[KnownFinding, ...] = (
    KnownFinding(
        'F1',
        'a Module class defined where its __module__ is not in sys.modules fails in linen',
        'define',
        'raises',
        None,
        ('define_module_not_in_sys_modules_1',),
    ),
    KnownFinding(
        'F2',
        'nn.logical_to_mesh warns (LogicalAxisRulesWarning) where Flax is silent',
        'partition',
        'warnings',
        frozenset(),
        ('partition_warnings_1',),
    ),
)


def known_finding(diff: Difference, features: set[str]) -> KnownFinding | None:
    for finding in KNOWN:
        if finding.matches(diff, features):
            return finding
    return None


def open_reproducers() -> dict[str, KnownFinding]:
    """Reproducer name -> the open finding it reproduces."""
    return {name: f for f in KNOWN for name in f.reproducers}


__all__ = ['KNOWN', 'KnownFinding', 'known_finding', 'open_reproducers']
