"""Activations: jax.nn re-exports and the PReLU layer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.layers import activation

# Every activation but these three is jax.nn's own function.
JAX_NN = [n for n in activation.__all__ if n not in ('PReLU', 'tanh', 'normalize')]


@pytest.mark.parametrize('name', JAX_NN)
def test_functions_are_jax_nn(name):
    assert getattr(activation, name) is getattr(jax.nn, name)


def test_tanh_and_normalize():
    assert activation.tanh is jnp.tanh
    x = jnp.array([[1.0, 2.0, 6.0], [0.0, -1.0, 1.0]])
    expected = (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(activation.normalize(x), expected, rtol=1e-5)


def test_surface_is_what_linen_layers_offers():
    import linen.layers as ll

    assert 'relu' in activation.__all__ and 'PReLU' in activation.__all__
    for name in activation.__all__:
        assert getattr(activation, name) is getattr(ll, name), name


def test_prelu_param_and_output():
    layer = activation.PReLU(negative_slope_init=0.2)
    x = jnp.array([[-2.0, -0.5, 0.0, 3.0]])
    variables = layer.init(jax.random.key(0), x)
    assert jax.tree_util.tree_map(jnp.shape, variables) == {'params': {'negative_slope': ()}}
    np.testing.assert_allclose(variables['params']['negative_slope'], 0.2)
    np.testing.assert_allclose(layer.apply(variables, x), [[-0.4, -0.1, 0.0, 3.0]], rtol=1e-6)
    learned = {'params': {'negative_slope': jnp.float32(-1.0)}}
    np.testing.assert_allclose(layer.apply(learned, x), [[2.0, 0.5, 0.0, 3.0]])


def test_prelu_dtypes():
    layer = activation.PReLU(param_dtype=jnp.bfloat16)
    x = jnp.array([-1.0, 2.0], jnp.bfloat16)
    variables = layer.init(jax.random.key(0), x)
    assert variables['params']['negative_slope'].dtype == jnp.bfloat16
    assert layer.apply(variables, x).dtype == jnp.bfloat16
    # Float32 parameters do not upcast a bfloat16 activation.
    variables32 = activation.PReLU().init(jax.random.key(0), x)
    assert activation.PReLU().apply(variables32, x).dtype == jnp.bfloat16
