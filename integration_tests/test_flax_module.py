"""linen.module against flax.linen as an oracle: same variable trees, values and outputs.

Each model is built by one factory from the ``nn`` namespace it is given, so the
linen and the Flax versions are the same source text.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax.linen as flax_nn  # noqa: E402

import linen.nn as linen_nn  # noqa: E402


def models(nn):
    init = jax.nn.initializers

    class SimpleDense(nn.Module):
        features: int

        @nn.compact
        def __call__(self, x):
            kernel = self.param('kernel', init.lecun_normal(), (x.shape[-1], self.features))
            bias = self.param('bias', init.normal(), (self.features,))
            return x @ kernel + bias.reshape((1,) * (x.ndim - 1) + bias.shape)

    class ExplicitMLP(nn.Module):
        features: tuple

        def setup(self):
            self.layers = [SimpleDense(f) for f in self.features]

        def __call__(self, x):
            for i, lyr in enumerate(self.layers):
                x = lyr(x)
                if i != len(self.layers) - 1:
                    x = jax.nn.relu(x)
            return x

    class SimpleMLP(nn.Module):
        features: tuple

        @nn.compact
        def __call__(self, x):
            for i, f in enumerate(self.features):
                x = SimpleDense(f, name=f'layers_{i}')(x)
                if i != len(self.features) - 1:
                    x = jax.nn.relu(x)
            return x

    class AutoNamed(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = SimpleDense(3)(x)
            x = SimpleDense(3, name='named')(x)
            return SimpleDense(2)(x)

    class ExplicitDense(nn.Module):
        features_in: int
        features: int

        def setup(self):
            self.kernel = self.param(
                'kernel', init.lecun_normal(), (self.features_in, self.features)
            )
            self.bias = self.param('bias', init.normal(), (self.features,))

        def __call__(self, x):
            return x @ self.kernel + self.bias.reshape((1,) * (x.ndim - 1) + self.bias.shape)

    class Counter(nn.Module):
        @nn.compact
        def __call__(self):
            is_initialized = self.has_variable('counter', 'count')
            counter = self.variable('counter', 'count', lambda: jnp.zeros((), jnp.int32))
            if is_initialized:
                counter.value += 1
            return counter.value

    class NestedCompact(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = SimpleMLP((3, 4))(x)
            x = AutoNamed()(x)
            noise = jax.random.normal(self.make_rng('noise'), x.shape)
            return x + 0.0 * noise

    class DictSetup(nn.Module):
        def setup(self):
            self.branches = {'a': SimpleDense(2), 'b': SimpleDense(2)}
            self.head = (SimpleDense(3), SimpleDense(1))

        def __call__(self, x):
            x = self.branches['a'](x) * self.branches['b'](x)
            return self.head[1](self.head[0](x))

    class SharedTwice(nn.Module):
        @nn.compact
        def __call__(self, x):
            shared = SimpleDense(4, name='shared')
            mlp = SimpleMLP((4, 4))
            return mlp(shared(shared(x))) + mlp(x)

    class WithDense(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(5)(x)
            return nn.Dense(2, use_bias=False)(nn.relu(x))

    class AutoEncoder(nn.Module):
        def setup(self):
            self.encoder = SimpleDense(2)
            self.decoder = SimpleDense(4)

        def encode(self, x):
            return self.encoder(x)

        def decode(self, z):
            return self.decoder(z)

        def __call__(self, x):
            return self.decode(self.encode(x))

    return {
        'SimpleDense': SimpleDense(3),
        'ExplicitMLP': ExplicitMLP((3, 4, 5)),
        'SimpleMLP': SimpleMLP((3, 4, 5)),
        'AutoNamed': AutoNamed(),
        'ExplicitDense': ExplicitDense(4, 3),
        'NestedCompact': NestedCompact(),
        'DictSetup': DictSetup(),
        'SharedTwice': SharedTwice(),
        'WithDense': WithDense(),
        'AutoEncoder': AutoEncoder(),
        'Counter': Counter(),
    }


LINEN = models(linen_nn)
FLAX = models(flax_nn)


def inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    return jax.random.uniform(k1, (4, 4)), k2


def assert_same_tree(ours, theirs):
    theirs = jax.tree_util.tree_map(lambda a: a, dict(theirs))
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(
        jax.tree_util.tree_map(lambda a: a, theirs)
    ), f'{jax.tree_util.tree_map(jnp.shape, ours)} != {jax.tree_util.tree_map(jnp.shape, theirs)}'
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize('key_fn', [jax.random.key, jax.random.PRNGKey])
@pytest.mark.parametrize('name', [n for n in LINEN if n != 'Counter'])
def test_same_variables_and_outputs_as_flax(name, key_fn):
    x, _ = inputs()
    root = key_fn(1)
    rngs = {'params': root, 'noise': key_fn(2)}
    y_ours, v_ours = LINEN[name].init_with_output(rngs, x)
    y_flax, v_flax = FLAX[name].init_with_output(rngs, x)
    assert_same_tree(v_ours, v_flax)
    np.testing.assert_array_equal(np.asarray(y_ours), np.asarray(y_flax))
    out_ours = LINEN[name].apply(v_ours, x, rngs={'noise': key_fn(3)})
    out_flax = FLAX[name].apply(v_flax, x, rngs={'noise': key_fn(3)})
    np.testing.assert_allclose(np.asarray(out_ours), np.asarray(out_flax), rtol=1e-6, atol=1e-6)


def test_method_argument_like_flax():
    x, key = inputs()
    for method in ('encode', 'decode'):
        arg = x if method == 'encode' else x[:, :2]
        v_ours = LINEN['AutoEncoder'].init(key, arg, method=method)
        v_flax = FLAX['AutoEncoder'].init(key, arg, method=method)
        assert_same_tree(v_ours, v_flax)
        np.testing.assert_array_equal(
            LINEN['AutoEncoder'].apply(v_ours, arg, method=method),
            FLAX['AutoEncoder'].apply(v_flax, arg, method=method),
        )


def test_counter_like_flax():
    v_ours = LINEN['Counter'].init(jax.random.key(0))
    v_flax = FLAX['Counter'].init(jax.random.key(0))
    assert_same_tree(v_ours, v_flax)
    y_ours, m_ours = LINEN['Counter'].apply(v_ours, mutable=['counter'])
    y_flax, m_flax = FLAX['Counter'].apply(v_flax, mutable=['counter'])
    assert int(y_ours) == int(y_flax) == 1
    assert_same_tree(m_ours, m_flax)


def test_capture_intermediates_like_flax():
    x, key = inputs()
    v = LINEN['ExplicitMLP'].init(key, x)
    _, s_ours = LINEN['ExplicitMLP'].apply(v, x, capture_intermediates=True)
    _, s_flax = FLAX['ExplicitMLP'].apply(v, x, capture_intermediates=True)
    assert_same_tree(s_ours, s_flax)
