"""``trace_times``: Python time per module while tracing, against known sleeps."""

import functools
import time

import jax
import jax.numpy as jnp
import pytest

nn = pytest.importorskip('linen.nn')

from linen.profiling import trace_times  # noqa: E402

SLOW, FAST = 0.08, 0.02


class Sleeper(nn.Module):
    seconds: float

    @nn.compact
    def __call__(self, x):
        time.sleep(self.seconds)  # Python work while tracing, of a known length
        return nn.Dense(3)(x)


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Sleeper(SLOW, name='slow')(x)
        return Sleeper(FAST, name='fast')(x)


# A busy machine (a shared CI runner) stretches a run now and then: timings are
# compared on the quickest of a few runs, which load only ever makes slower.
RUNS = 3


def _quickest_trace_times(model, variables, x):
    return min(
        (trace_times(model.apply, variables, x) for _ in range(RUNS)),
        key=lambda times: times.total_seconds,
    )


def test_self_and_inclusive_times_match_known_sleeps():
    model, x = Model(), jnp.ones((2, 3))
    variables = model.init(jax.random.key(0), x)
    times = _quickest_trace_times(model, variables, x)
    slow, fast = times['Model/slow'], times['Model/fast']
    # Self time is the sleep plus a little tracing of the module's own code
    # (the Dense inside is its own row).
    assert SLOW <= slow.seconds <= SLOW * 1.1 + 0.01
    assert FAST <= fast.seconds <= FAST * 1.1 + 0.01
    assert slow.inclusive_seconds == pytest.approx(
        slow.seconds + times['Model/slow/Dense_0'].seconds
    )
    assert times['Model'].inclusive_seconds >= SLOW + FAST
    assert slow.calls == fast.calls == 1
    # The rows' own times add up to the measured trace time.
    assert sum(row.seconds for row in times.rows) == pytest.approx(times.total_seconds, rel=1e-6)
    assert times['Model'].inclusive_seconds <= times.total_seconds
    assert str(times).splitlines()[0].startswith('Trace time per module')


def test_rows_sum_to_an_independently_measured_trace_time():
    model, x = Model(), jnp.ones((2, 3))
    variables = model.init(jax.random.key(0), x)
    trace_times(model.apply, variables, x)  # warm: first-time imports and caches
    # The same trace, timed here without the recording wrapper (a fresh
    # callable each time, so jit's trace cache cannot answer for it).
    durations = []
    for _ in range(RUNS):
        started = time.perf_counter()
        jax.make_jaxpr(functools.partial(model.apply))(variables, x)
        durations.append(time.perf_counter() - started)
    measured = min(durations)
    times = _quickest_trace_times(model, variables, x)
    # The sleeps (0.1 s) dominate both, so 10 % is far above timing noise.
    assert sum(row.seconds for row in times.rows) == pytest.approx(measured, rel=0.10)
    assert sum(row.seconds for row in times.rows if row.path) == pytest.approx(measured, rel=0.10)
