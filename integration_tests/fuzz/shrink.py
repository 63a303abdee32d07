"""Shrinking a program that shows a difference to a minimal one that still shows it.

Greedy: try each simpler program the grammar offers (:meth:`Program.shrinks`), keep
the first that is strictly simpler and still shows a difference of the same
signature (stage and kind), start again from it; stop when no candidate is kept or
the budget is spent. Candidates run only the stage of the signature (after init).
"""

from __future__ import annotations

import time

from integration_tests.fuzz.program import Program
from integration_tests.fuzz.runner import differences


def simplicity(program: Program) -> tuple[int, int, int, int]:
    """Smaller is simpler: node count, rank, features, then source length."""
    return (program.size(), program.rank, len(program.features()), len(program.source()))


def shows(program: Program, signature: tuple[str, str]) -> bool:
    try:
        source = program.source()
    except Exception:  # a candidate the grammar cannot render is not simpler
        return False
    return any(d.signature() == signature for d in differences(source, (signature[0],)))


def shrink(
    program: Program, signature: tuple[str, str], budget_s: float = 90.0, max_tries: int = 200
) -> Program:
    """The simplest program reachable from ``program`` that still shows ``signature``."""
    deadline = time.monotonic() + budget_s
    tries = 0
    current = program
    improved = True
    while improved and tries < max_tries and time.monotonic() < deadline:
        improved = False
        base = simplicity(current)
        for candidate in current.shrinks():
            if simplicity(candidate) >= base:
                continue
            tries += 1
            if shows(candidate, signature):
                current = candidate
                improved = True
                break
            if tries >= max_tries or time.monotonic() >= deadline:
                break
    return current


__all__ = ['shrink', 'shows', 'simplicity']
