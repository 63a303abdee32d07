"""``lazy_init`` against Flax's: same arguments, same (concrete) variables."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax.linen as flax_nn  # noqa: E402

import linen.nn as linen_nn  # noqa: E402


def model(nn):
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            x = nn.Dense(8)(x)
            x = nn.BatchNorm(use_running_average=not train)(x)
            x = nn.Dropout(0.5, deterministic=not train)(x)
            if train:  # a Python branch on a concrete flag
                x = nn.Dense(4, name='train_head')(x)
            return nn.Dense(2)(nn.relu(x))

    return Net()


@pytest.mark.parametrize('train', [True, False])
def test_lazy_init_gives_flax_variables(train):
    rngs = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}
    sds = jax.ShapeDtypeStruct((3, 5), jnp.float32)
    ours = model(linen_nn).lazy_init(rngs, sds, train)
    theirs = model(flax_nn).lazy_init(rngs, sds, train)
    theirs = flax_nn.meta.unbox(theirs)
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(dict(theirs))
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert isinstance(a, jax.Array) and isinstance(b, jax.Array)
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
