"""Sequential: argument passing between layers, naming, errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.layers import Dense, Sequential, relu
from linen.layers.errors import LayerArgumentError
from linen.module import Module, compact

KEY = jax.random.key(0)


def test_chain_of_layers_and_functions():
    model = Sequential([Dense(4), relu, Dense(2)])
    x = jax.random.normal(KEY, (3, 5))
    variables = model.init(KEY, x)
    p = variables['params']
    assert sorted(p) == ['layers_0', 'layers_2']
    h = np.maximum(
        np.asarray(x) @ np.asarray(p['layers_0']['kernel']) + np.asarray(p['layers_0']['bias']), 0
    )
    expected = h @ np.asarray(p['layers_2']['kernel']) + np.asarray(p['layers_2']['bias'])
    np.testing.assert_allclose(model.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_tuples_spread_dicts_become_keywords_and_kwargs_reach_the_first_layer():
    seen = []

    def first(x, scale=1.0):
        return x * scale, x + 1

    def second(a, b):
        seen.append('second')
        return {'left': a, 'right': b}

    def third(left, right):
        return left - right

    y = Sequential([first, second, third]).apply({}, jnp.ones(2), scale=3.0)
    np.testing.assert_allclose(y, [1.0, 1.0])
    assert seen == ['second']


LAYER_SHAPES = [{'kernel': (2, 3), 'bias': (3,)}, {'kernel': (3, 1), 'bias': (1,)}]


def test_built_in_a_compact_method():
    # As in Flax: layers built inside a compact method belong to that method's
    # module (Dense_0, Dense_1), not to the Sequential.
    class CompactNet(Module):
        @compact
        def __call__(self, x):
            return Sequential([Dense(3), Dense(1)])(x)

    compact_vars = CompactNet().init(KEY, jnp.ones((1, 2)))
    assert jax.tree_util.tree_map(jnp.shape, compact_vars['params']) == {
        'Dense_0': LAYER_SHAPES[0],
        'Dense_1': LAYER_SHAPES[1],
    }


def test_built_in_setup():
    class SetupNet(Module):
        def setup(self):
            self.seq = Sequential([Dense(3), Dense(1)])

        def __call__(self, x):
            return self.seq(x)

    setup_vars = SetupNet().init(KEY, jnp.ones((1, 2)))
    assert jax.tree_util.tree_map(jnp.shape, setup_vars['params']) == {
        'seq': {'layers_0': LAYER_SHAPES[0], 'layers_1': LAYER_SHAPES[1]}
    }


def test_empty_sequential_is_an_error():
    with pytest.raises(LayerArgumentError, match='Sequential: the layers list is empty'):
        Sequential([]).init(KEY, jnp.ones(2))
