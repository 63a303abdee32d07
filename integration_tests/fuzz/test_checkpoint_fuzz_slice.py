"""A fixed-seed slice of the checkpoint fuzzer (``checkpoints.py``), run by CI.

Every input restores to the right tree or raises ``InvalidCheckpointError``; none
raises anything else, runs slowly or allocates out of proportion to its size.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integration_tests.fuzz import checkpoints


def test_checkpoint_slice_restores_or_raises_invalid_checkpoint():
    report = checkpoints.run('ci', 4000)
    assert report.inputs == 4000
    # The slice reaches every reader, both ways (restored and refused).
    for where in ('msgpack_restore', 'from_bytes', 'from_state_dict'):
        assert report.outcomes[f'{where}: restored'] > 50, report.outcomes
        assert report.outcomes[f'{where}: InvalidCheckpointError'] > 50, report.outcomes
    assert not report.failures, report.summary()


def test_the_checker_reports_a_reader_that_raises_the_wrong_error(monkeypatch):
    from linen.core import serialization

    real = serialization.msgpack_restore

    def leaky(data):
        if len(data) % 7 == 0:
            raise ValueError('bare ValueError from a broken reader')
        return real(data)

    monkeypatch.setattr(serialization, 'msgpack_restore', leaky)
    report = checkpoints.run('ci', 300)
    assert any(f.kind == 'exception' and 'bare ValueError' in f.detail for f in report.failures)


def test_the_checker_reports_a_reader_that_spends_cpu_and_leaves_the_heap_unfrozen(monkeypatch):
    import gc
    import time

    from linen.core import serialization

    real = serialization.msgpack_restore
    spun = []

    def slow(data):
        if len(data) % 5 == 0:
            start = time.thread_time()
            while time.thread_time() - start < 0.05:  # CPU, not sleep: the check counts CPU
                pass
            spun.append(data)
        return real(data)

    monkeypatch.setattr(serialization, 'msgpack_restore', slow)
    monkeypatch.setattr(checkpoints, 'SLOW_S', 0.03)
    report = checkpoints.run('ci', 60)
    slow_inputs = [f.data for f in report.failures if f.kind == 'slow']
    assert spun and set(slow_inputs) <= set(spun)
    # Inputs traced for memory are not timed (tracemalloc slows every allocation).
    assert len(slow_inputs) >= len(spun) - 60 // checkpoints.TRACE_EVERY - 1
    assert gc.get_freeze_count() == 0
