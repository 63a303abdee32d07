"""Flax as oracle for ``nn.map_variables`` with ``init=True`` outside init: the
transformed scope sees only the mapped collections the caller made mutable."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')


def mapped_dense(nn, mutable, variables=True):
    return nn.map_variables(
        nn.Dense,
        'params',
        trans_in_fn=lambda vs: vs,
        trans_out_fn=lambda vs: vs,
        init=True,
        mutable=mutable,
        variables=variables,
    )(2)


# A variables= filter admitting only the mapped collection: the function can change
# nothing it sees in an apply mutating another collection, so (as in Flax) there is no
# first run and the parameters are read as given (fuzz prototype seed 5701, program
# 2350: linen made the first run and found no parameters).
@pytest.mark.parametrize('admitted', [True, ['params']], ids=['every_collection', 'params_only'])
@pytest.mark.parametrize('mutable', [True, False])
@pytest.mark.parametrize('apply_mutable', [False, ['params'], ['batch_stats']])
def test_map_variables_init_true_in_apply_as_flax(mutable, apply_mutable, admitted):
    x = jnp.linspace(-1.0, 1.0, 3, dtype=jnp.float32)
    outcome = []
    for nn in (flax_nn, linen_nn):
        model = mapped_dense(nn, mutable, admitted)
        variables = model.init(jax.random.key(0), x)
        try:
            out = model.apply(variables, x, mutable=apply_mutable)
        except Exception as e:  # the outcome compared: Flax's error type
            outcome.append(type(e).__name__)
        else:
            y = out[0] if apply_mutable else out
            outcome.append(np.asarray(y))
    if isinstance(outcome[0], str):
        assert outcome == ['ScopeCollectionNotFound', 'ScopeCollectionNotFound']
    else:
        np.testing.assert_array_equal(outcome[1], outcome[0])


def carry_created_in_body(nn):
    class Counter(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            n = self.variable('state', 'n', lambda: jnp.zeros((), jnp.float32))
            n.value = n.value + 1.0
            return c + x * n.value, c

    return nn.scan(
        Counter,
        variable_broadcast='params',
        variable_carry='state',
        split_rngs={'params': False},
    )()


def test_scan_creating_a_variable_carry_collection_raises_as_flax():
    """Flax stops on JAX's TypeError here (an AssertionError in other programs, see
    fuzz finding F8); linen's typed error is both."""
    xs = jnp.ones((4,), jnp.float32)
    for nn in (flax_nn, linen_nn):
        with pytest.raises(TypeError, match='carry'):
            carry_created_in_body(nn).init(jax.random.key(0), jnp.zeros(()), xs)
    with pytest.raises(AssertionError):
        carry_created_in_body(linen_nn).init(jax.random.key(0), jnp.zeros(()), xs)


def broadcast_axis_scan(nn, split):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            h = nn.Dense(3)(c + x)
            return h, h

    return nn.scan(Cell, variable_axes={'params': nn.broadcast}, split_rngs={'params': split})()


@pytest.mark.parametrize('split', [True, False])
def test_scan_with_broadcast_in_variable_axes_raises_assertion_error_as_flax(split):
    c, xs = jnp.zeros(3, jnp.float32), jnp.ones((2, 3), jnp.float32)
    for nn in (flax_nn, linen_nn):
        with pytest.raises(AssertionError):
            broadcast_axis_scan(nn, split).init(jax.random.key(0), c, xs)
