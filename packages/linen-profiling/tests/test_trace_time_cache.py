"""``trace_times`` of a function that jit (or an earlier ``trace_times``) traced before."""

import jax
import jax.numpy as jnp
import pytest

nn = pytest.importorskip('linen.nn')

from linen.profiling import trace_times  # noqa: E402


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(nn.relu(nn.Dense(4)(x)))


MODEL = MLP()


def forward(variables, x):
    return MODEL.apply(variables, x)


def test_a_function_traced_before_is_traced_again():
    x = jnp.ones((2, 3))
    variables = MODEL.init(jax.random.key(0), x)
    # The same function object, already traced by jit with the same shapes: jit's
    # cache must not hide the Module calls from the report.
    jax.jit(forward)(variables, x)
    for _ in range(2):
        times = trace_times(forward, variables, x)
        assert [(row.path, row.calls) for row in times.rows] == [
            ('MLP', 1),
            ('MLP/Dense_0', 1),
            ('MLP/Dense_1', 1),
            ('', 0),
        ]
