"""The Module examples of Flax's Linen introduction (``docs/linen_intro`` in Flax)
that need layers (nn.Dense, nn.Dropout, nn.BatchNorm), run unchanged with ``import linen.nn as nn`` and checked against flax.linen.

The transform examples (nn.jit, nn.remat, nn.vmap, nn.scan) belong to linen-transforms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax, random

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax.linen as flax_nn  # noqa: E402

import linen.nn as linen_nn  # noqa: E402


@pytest.fixture(autouse=True)
def _intro_code_relies_on_rank_promotion():
    """The guide's ``SimpleDense``/``ExplicitDense`` add a ``(features,)`` bias to a
    ``(batch, features)`` output, which needs implicit rank promotion; with
    ``jax_numpy_rank_promotion='raise'`` (the suite's setting) Flax rejects that code
    exactly as JAX does for us. The examples are kept verbatim, so they run with
    promotion allowed; linen's own layers are strict-safe and tested so elsewhere."""
    with jax.numpy_rank_promotion('allow'):
        yield


def intro_models(nn):
    class ExplicitMLP(nn.Module):
        features: Sequence[int]

        def setup(self):
            self.layers = [nn.Dense(feat) for feat in self.features]

        def __call__(self, inputs):
            x = inputs
            for i, lyr in enumerate(self.layers):
                x = lyr(x)
                if i != len(self.layers) - 1:
                    x = nn.relu(x)
            return x

    class SimpleMLP(nn.Module):
        features: Sequence[int]

        @nn.compact
        def __call__(self, inputs):
            x = inputs
            for i, feat in enumerate(self.features):
                x = nn.Dense(feat, name=f'layers_{i}')(x)
                if i != len(self.features) - 1:
                    x = nn.relu(x)
            return x

    class SimpleDense(nn.Module):
        features: int
        kernel_init: Callable = nn.initializers.lecun_normal()
        bias_init: Callable = nn.initializers.zeros_init()

        @nn.compact
        def __call__(self, inputs):
            kernel = self.param('kernel', self.kernel_init, (inputs.shape[-1], self.features))
            y = lax.dot_general(inputs, kernel, (((inputs.ndim - 1,), (0,)), ((), ())))
            bias = self.param('bias', self.bias_init, (self.features,))
            return y + bias

    class ExplicitDense(nn.Module):
        features_in: int
        features: int
        kernel_init: Callable = nn.initializers.lecun_normal()
        bias_init: Callable = nn.initializers.zeros_init()

        def setup(self):
            self.kernel = self.param('kernel', self.kernel_init, (self.features_in, self.features))
            self.bias = self.param('bias', self.bias_init, (self.features,))

        def __call__(self, inputs):
            y = lax.dot_general(inputs, self.kernel, (((inputs.ndim - 1,), (0,)), ((), ())))
            return y + self.bias

    class Block(nn.Module):
        features: int
        training: bool

        @nn.compact
        def __call__(self, inputs):
            x = nn.Dense(self.features)(inputs)
            x = nn.Dropout(rate=0.5)(x, deterministic=not self.training)
            x = nn.BatchNorm(use_running_average=not self.training)(x)
            return x

    return {
        'ExplicitMLP': lambda: ExplicitMLP(features=[3, 4, 5]),
        'SimpleMLP': lambda: SimpleMLP(features=[3, 4, 5]),
        'SimpleDense': lambda: SimpleDense(features=3),
        'ExplicitDense': lambda: ExplicitDense(features_in=4, features=3),
        'Block': Block,
    }


OURS = intro_models(linen_nn)
THEIRS = intro_models(flax_nn)


def same(a, b):
    a = jax.tree_util.tree_map(np.asarray, dict(a))
    b = jax.tree_util.tree_map(np.asarray, dict(b))
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('name', ['ExplicitMLP', 'SimpleMLP', 'SimpleDense', 'ExplicitDense'])
def test_intro_model_matches_flax(name):
    key1, key2 = random.split(random.key(0), 2)
    x = random.uniform(key1, (4, 4))
    ours, theirs = OURS[name](), THEIRS[name]()
    v_ours, v_theirs = ours.init(key2, x), theirs.init(key2, x)
    same(v_ours, v_theirs)
    y = ours.apply(v_ours, x)
    same({'y': y}, {'y': theirs.apply(v_theirs, x)})
    assert y.shape == (4, 5 if 'MLP' in name else 3)


def test_intro_block_with_dropout_and_batchnorm_matches_flax():
    key1, key2, key3, key4 = random.split(random.key(0), 4)
    x = random.uniform(key1, (3, 4, 4))
    ours, theirs = OURS['Block'](features=3, training=True), THEIRS['Block'](3, True)
    v_ours = ours.init({'params': key2, 'dropout': key3}, x)
    v_theirs = theirs.init({'params': key2, 'dropout': key3}, x)
    same(v_ours, v_theirs)
    y, mutated = ours.apply(v_ours, x, rngs={'dropout': key4}, mutable=['batch_stats'])
    y_t, mutated_t = theirs.apply(v_theirs, x, rngs={'dropout': key4}, mutable=['batch_stats'])
    same({'y': y, **mutated}, {'y': y_t, **mutated_t})
    # evaluation with the updated statistics returns the output only
    updated = {'params': v_ours['params'], **mutated}
    y_eval = OURS['Block'](features=3, training=False).apply(updated, x)
    y_eval_t = THEIRS['Block'](3, False).apply({'params': v_theirs['params'], **mutated_t}, x)
    assert isinstance(y_eval, jax.Array)
    same({'y': y_eval}, {'y': y_eval_t})
    assert jnp.shape(y_eval) == (3, 4, 3)
