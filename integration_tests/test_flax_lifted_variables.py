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


def mapped_dense(nn, mutable):
    return nn.map_variables(
        nn.Dense,
        'params',
        trans_in_fn=lambda vs: vs,
        trans_out_fn=lambda vs: vs,
        init=True,
        mutable=mutable,
    )(2)


@pytest.mark.parametrize('mutable', [True, False])
@pytest.mark.parametrize('apply_mutable', [False, ['params'], ['batch_stats']])
def test_map_variables_init_true_in_apply_as_flax(mutable, apply_mutable):
    x = jnp.linspace(-1.0, 1.0, 3, dtype=jnp.float32)
    outcome = []
    for nn in (flax_nn, linen_nn):
        model = mapped_dense(nn, mutable)
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
