"""Dense under Explicit, Auto and mixed mesh axes (the suite's 4 host devices, 2x2)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import linen.nn as nn

TYPES = {
    'explicit': (AxisType.Explicit, AxisType.Explicit),
    'auto': (AxisType.Auto, AxisType.Auto),
    'mixed': (AxisType.Explicit, AxisType.Auto),
}


@pytest.mark.parametrize('types', list(TYPES))
def test_dense_with_sharded_contracting_dimension(types):
    # Flax's Dense raises ShardingTypeError here under Explicit axes.
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES[types])
    x = jnp.arange(32.0).reshape(4, 8) / 10
    kernel = jnp.arange(24.0).reshape(8, 3) / 7
    bias = jnp.array([0.5, -1.0, 2.0])
    variables = {'params': {'kernel': kernel, 'bias': bias}}
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, NamedSharding(mesh, P('data', 'model')))
        ks = jax.device_put(kernel, NamedSharding(mesh, P('model', None)))
        sharded = {'params': {'kernel': ks, 'bias': bias}}
        y = jax.jit(nn.Dense(3).apply)(sharded, xs)
    np.testing.assert_allclose(y, x @ kernel + bias.reshape(1, 3), rtol=1e-6, atol=1e-6)
    assert y.sharding.spec[0] == 'data'
    np.testing.assert_allclose(nn.Dense(3).apply(variables, x), y, rtol=1e-6, atol=1e-6)


def test_dense_tensor_parallel_under_explicit_axes_keeps_the_feature_sharding():
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES['explicit'])
    x = jnp.ones((4, 8))
    kernel = jnp.arange(32.0).reshape(8, 4)
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, NamedSharding(mesh, P('data', None)))
        ks = jax.device_put(kernel, NamedSharding(mesh, P(None, 'model')))
        y = jax.jit(nn.Dense(4, use_bias=False).apply)({'params': {'kernel': ks}}, xs)
    assert y.sharding.spec == P('data', 'model')
    np.testing.assert_allclose(y, x @ kernel, rtol=1e-6)
