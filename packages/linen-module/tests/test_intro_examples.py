"""The Module examples of Flax's Linen introduction (``docs/linen_intro`` in Flax),
with hand-written layers.

linen-module must test alone, so ``nn.Dense`` is replaced by ``MyDense`` below;
the examples with the real layers are in ``integration_tests/test_flax_intro_examples.py``.
Expected values follow the PRNG rule of ``docs/design.md``, computed here with hashlib.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax, random

import linen.nn as nn


@pytest.fixture(autouse=True)
def _intro_code_relies_on_rank_promotion():
    """The guide's ``SimpleDense``/``ExplicitDense`` add a ``(features,)`` bias to a
    ``(batch, features)`` output, which needs implicit rank promotion; with
    ``jax_numpy_rank_promotion='raise'`` (the suite's setting) Flax rejects that code
    exactly as JAX does for us. The examples are kept verbatim, so they run with
    promotion allowed; linen's own layers are strict-safe and tested so elsewhere."""
    with jax.numpy_rank_promotion('allow'):
        yield


lecun_normal = jax.nn.initializers.lecun_normal
zeros_init = jax.nn.initializers.zeros


def key_for(root, *path):
    """The key ``make_rng`` returns at ``path[:-1]`` for call number ``path[-1]``."""
    raw = b''.join(
        p.encode() if isinstance(p, str) else p.to_bytes((p.bit_length() + 7) // 8, 'big')
        for p in path
    )
    return random.fold_in(root, int.from_bytes(hashlib.sha1(raw).digest()[:4], 'big'))


class MyDense(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        kernel = self.param('kernel', lecun_normal(), (x.shape[-1], self.features))
        bias = self.param('bias', zeros_init, (self.features,))
        return x @ kernel + bias[None]


def dense_params(root, path, fan_in, features):
    return {
        'kernel': lecun_normal()(key_for(root, *path, 1), (fan_in, features)),
        'bias': jnp.zeros((features,)),
    }


def data():
    key1, key2 = random.split(random.key(0), 2)
    return random.uniform(key1, (4, 4)), key2


# -------------------------------------------------------------------- the models


class ExplicitMLP(nn.Module):
    features: Sequence[int]

    def setup(self):
        self.layers = [MyDense(feat) for feat in self.features]

    def __call__(self, inputs):
        x = inputs
        for i, lyr in enumerate(self.layers):
            x = lyr(x)
            if i != len(self.layers) - 1:
                x = jax.nn.relu(x)
        return x


class SimpleMLP(nn.Module):
    features: Sequence[int]

    @nn.compact
    def __call__(self, inputs):
        x = inputs
        for i, feat in enumerate(self.features):
            x = MyDense(feat, name=f'layers_{i}')(x)
            if i != len(self.features) - 1:
                x = jax.nn.relu(x)
        return x


class AutoNamedMLP(nn.Module):
    features: Sequence[int]

    @nn.compact
    def __call__(self, inputs):
        x = inputs
        for i, feat in enumerate(self.features):
            x = MyDense(feat)(x)
            if i != len(self.features) - 1:
                x = jax.nn.relu(x)
        return x


class SimpleDense(nn.Module):
    features: int
    kernel_init: Callable = lecun_normal()
    bias_init: Callable = zeros_init

    @nn.compact
    def __call__(self, inputs):
        kernel = self.param('kernel', self.kernel_init, (inputs.shape[-1], self.features))
        y = lax.dot_general(inputs, kernel, (((inputs.ndim - 1,), (0,)), ((), ())))
        bias = self.param('bias', self.bias_init, (self.features,))
        return y + bias


class ExplicitDense(nn.Module):
    features_in: int
    features: int
    kernel_init: Callable = lecun_normal()
    bias_init: Callable = zeros_init

    def setup(self):
        self.kernel = self.param('kernel', self.kernel_init, (self.features_in, self.features))
        self.bias = self.param('bias', self.bias_init, (self.features,))

    def __call__(self, inputs):
        y = lax.dot_general(inputs, self.kernel, (((inputs.ndim - 1,), (0,)), ((), ())))
        return y + self.bias


class Counter(nn.Module):
    @nn.compact
    def __call__(self):
        is_initialized = self.has_variable('counter', 'count')
        counter = self.variable('counter', 'count', lambda: jnp.zeros((), jnp.int32))
        if is_initialized:
            counter.value += 1
        return counter.value


class AutoEncoder(nn.Module):
    def setup(self):
        self.encoder = MyDense(2)
        self.decoder = MyDense(4)

    def encode(self, x):
        return self.encoder(x)

    def decode(self, z):
        return self.decoder(z)

    def __call__(self, x):
        return self.decode(self.encode(x))


# ------------------------------------------------------------------------- tests


def shapes(tree):
    return jax.tree_util.tree_map(jnp.shape, tree)


def reference_mlp(params, x, names):
    for i, name in enumerate(names):
        x = x @ params[name]['kernel'] + params[name]['bias']
        if i != len(names) - 1:
            x = jax.nn.relu(x)
    return x


@pytest.mark.parametrize('model_cls', [ExplicitMLP, SimpleMLP])
def test_setup_and_compact_mlps(model_cls):
    x, key2 = data()
    model = model_cls(features=[3, 4, 5])
    init_variables = model.init(key2, x)
    assert shapes(init_variables) == {
        'params': {
            'layers_0': {'kernel': (4, 3), 'bias': (3,)},
            'layers_1': {'kernel': (3, 4), 'bias': (4,)},
            'layers_2': {'kernel': (4, 5), 'bias': (5,)},
        }
    }
    for i, fan_in, feat in [(0, 4, 3), (1, 3, 4), (2, 4, 5)]:
        want = dense_params(key2, (f'layers_{i}',), fan_in, feat)
        got = init_variables['params'][f'layers_{i}']
        np.testing.assert_array_equal(got['kernel'], want['kernel'])
        np.testing.assert_array_equal(got['bias'], want['bias'])
    y = model.apply(init_variables, x)
    assert y.shape == (4, 5)
    np.testing.assert_allclose(
        y,
        reference_mlp(init_variables['params'], x, ['layers_0', 'layers_1', 'layers_2']),
        rtol=1e-6,
    )


def test_compact_auto_names():
    x, key2 = data()
    variables = AutoNamedMLP(features=[3, 4, 5]).init(key2, x)
    assert list(variables['params']) == ['MyDense_0', 'MyDense_1', 'MyDense_2']
    np.testing.assert_array_equal(
        variables['params']['MyDense_1']['kernel'],
        dense_params(key2, ('MyDense_1',), 3, 4)['kernel'],
    )


def test_simple_dense():
    x, key2 = data()
    model = SimpleDense(features=3)
    init_variables = model.init(key2, x)
    kernel = lecun_normal()(key_for(key2, 1), (4, 3))
    np.testing.assert_array_equal(init_variables['params']['kernel'], kernel)
    np.testing.assert_array_equal(init_variables['params']['bias'], jnp.zeros(3))
    y = model.apply(init_variables, x)
    np.testing.assert_allclose(y, x @ kernel, rtol=1e-6)


def test_explicit_dense():
    x, key2 = data()
    model = ExplicitDense(features_in=4, features=3)
    init_variables = model.init(key2, x)
    assert shapes(init_variables) == {'params': {'kernel': (4, 3), 'bias': (3,)}}
    kernel = lecun_normal()(key_for(key2, 1), (4, 3))
    np.testing.assert_array_equal(init_variables['params']['kernel'], kernel)
    np.testing.assert_allclose(model.apply(init_variables, x), x @ kernel, rtol=1e-6)


def test_counter():
    model = Counter()
    init_variables = model.init(random.key(0))
    assert init_variables == {'counter': {'count': 0}}
    assert init_variables['counter']['count'].dtype == jnp.int32
    y, mutated_variables = model.apply(init_variables, mutable=['counter'])
    assert int(y) == 1
    assert int(mutated_variables['counter']['count']) == 1
    y2, mutated2 = model.apply(mutated_variables, mutable=['counter'])
    assert int(y2) == 2 and int(mutated2['counter']['count']) == 2
    assert int(init_variables['counter']['count']) == 0


def test_counter_without_mutable_rejects_the_write():
    init_variables = Counter().init(random.key(0))
    with pytest.raises(nn.errors.ModifyScopeVariableError, match='"counter" is immutable'):
        Counter().apply(init_variables)


def test_method_argument_encode_decode():
    x, key2 = data()
    model = AutoEncoder()
    enc_vars = model.init(key2, x, method='encode')
    assert shapes(enc_vars) == {'params': {'encoder': {'kernel': (4, 2), 'bias': (2,)}}}
    full = model.init(key2, x)
    z = model.apply(full, x, method='encode')
    p = full['params']
    np.testing.assert_allclose(z, x @ p['encoder']['kernel'], rtol=1e-6)
    y = model.apply(full, z, method='decode')
    np.testing.assert_allclose(y, z @ p['decoder']['kernel'], rtol=1e-6)
    np.testing.assert_allclose(model.apply(full, x), y, rtol=1e-6)
    # every accepted spelling of method= gives the same result
    for method in (AutoEncoder.decode, model.decode, lambda m, z: m.decode(z)):
        np.testing.assert_allclose(model.apply(full, z, method=method), y, rtol=1e-6)
