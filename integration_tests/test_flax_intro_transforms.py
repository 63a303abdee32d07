"""The transform examples of Flax's Linen introduction (``docs/linen_intro`` in Flax):
nn.jit MLP, nn.remat MLP, two-level nn.vmap attention and nn.scan LSTM run unchanged
with ``import linen.nn as nn``; for remat, vmap and scan the parameters and outputs
equal flax.linen's for the same key.

The example code is written once, in ``build(nn, ...)``, and run with each library.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax, random

import linen.nn as linen_nn


def build(nn):
    class MLP(nn.Module):
        features: Sequence[int]

        @nn.compact
        def __call__(self, inputs):
            x = inputs
            for i, feat in enumerate(self.features):
                x = nn.jit(nn.Dense)(feat, name=f'layers_{i}')(x)
                if i != len(self.features) - 1:
                    x = nn.relu(x)
            return x

    class RematMLP(nn.Module):
        features: Sequence[int]

        @nn.remat
        @nn.compact
        def __call__(self, inputs):
            x = inputs
            for i, feat in enumerate(self.features):
                x = nn.Dense(feat, name=f'layers_{i}')(x)
                if i != len(self.features) - 1:
                    x = nn.relu(x)
            return x

    class RawDotProductAttention(nn.Module):
        attn_dropout_rate: float = 0.1
        train: bool = False

        @nn.compact
        def __call__(self, query, key, value, bias=None, dtype=jnp.float32):
            assert key.ndim == query.ndim
            assert key.ndim == value.ndim
            n = query.ndim
            attn_weights = lax.dot_general(query, key, (((n - 1,), (n - 1,)), ((), ())))
            if bias is not None:
                attn_weights += bias
            norm_dims = tuple(range(attn_weights.ndim // 2, attn_weights.ndim))
            attn_weights = jax.nn.softmax(attn_weights, axis=norm_dims)
            attn_weights = nn.Dropout(self.attn_dropout_rate)(
                attn_weights, deterministic=not self.train
            )
            attn_weights = attn_weights.astype(dtype)
            contract_dims = (tuple(range(n - 1, attn_weights.ndim)), tuple(range(0, n - 1)))
            y = lax.dot_general(attn_weights, value, (contract_dims, ((), ())))
            return y

    class DotProductAttention(nn.Module):
        qkv_features: Optional[int] = None  # noqa: UP045 (the guide's spelling)
        out_features: Optional[int] = None  # noqa: UP045
        train: bool = False

        @nn.compact
        def __call__(self, inputs_q, inputs_kv, bias=None, dtype=jnp.float32):
            qkv_features = self.qkv_features or inputs_q.shape[-1]
            out_features = self.out_features or inputs_q.shape[-1]
            QKVDense = functools.partial(
                nn.Dense, features=qkv_features, use_bias=False, dtype=dtype
            )
            query = QKVDense(name='query')(inputs_q)
            key = QKVDense(name='key')(inputs_kv)
            value = QKVDense(name='value')(inputs_kv)
            y = RawDotProductAttention(train=self.train)(query, key, value, bias=bias, dtype=dtype)
            y = nn.Dense(features=out_features, dtype=dtype, name='out')(y)
            return y

    class MultiHeadDotProductAttention(nn.Module):
        qkv_features: Optional[int] = None  # noqa: UP045
        out_features: Optional[int] = None  # noqa: UP045
        batch_axes: Sequence[int] = (0,)
        num_heads: int = 1
        broadcast_dropout: bool = False
        train: bool = False

        @nn.compact
        def __call__(self, inputs_q, inputs_kv, bias=None, dtype=jnp.float32):
            qkv_features = self.qkv_features or inputs_q.shape[-1]
            out_features = self.out_features or inputs_q.shape[-1]
            Attn = nn.vmap(
                DotProductAttention,
                in_axes=(None, None, None),
                out_axes=2,
                axis_size=self.num_heads,
                variable_axes={'params': 0},
                split_rngs={'params': True, 'dropout': not self.broadcast_dropout},
            )
            for axis in reversed(sorted(self.batch_axes)):
                Attn = nn.vmap(
                    Attn,
                    in_axes=(axis, axis, axis),
                    out_axes=axis,
                    variable_axes={'params': None},
                    split_rngs={'params': False, 'dropout': False},
                )
            y = Attn(
                qkv_features=qkv_features // self.num_heads,
                out_features=out_features,
                train=self.train,
                name='attention',
            )(inputs_q, inputs_kv, bias)
            return y.mean(axis=-2)

    class SimpleScan(nn.Module):
        features: int

        @nn.compact
        def __call__(self, xs):
            LSTM = nn.scan(
                nn.LSTMCell,
                in_axes=1,
                out_axes=1,
                variable_broadcast='params',
                split_rngs={'params': False},
            )
            lstm = LSTM(self.features, name='lstm_cell')
            dummy_rng = random.key(0)
            input_shape = xs[:, 0].shape
            init_carry = lstm.initialize_carry(dummy_rng, input_shape)
            return lstm(init_carry, xs)

    return dict(
        MLP=MLP,
        RematMLP=RematMLP,
        MultiHeadDotProductAttention=MultiHeadDotProductAttention,
        SimpleScan=SimpleScan,
    )


def shapes(tree):
    return jax.tree_util.tree_map(jnp.shape, tree)


def as_dict(tree):
    return jax.tree_util.tree_map(lambda x: x, dict(tree))


MLP_SHAPES = {
    'params': {
        'layers_0': {'bias': (3,), 'kernel': (4, 3)},
        'layers_1': {'bias': (4,), 'kernel': (3, 4)},
        'layers_2': {'bias': (5,), 'kernel': (4, 5)},
    }
}


def run_mlp(nn, name):
    models = build(nn)
    key1, key2 = random.split(random.key(3), 2)
    x = random.uniform(key1, (4, 4))
    model = models[name](features=[3, 4, 5])
    init_variables = model.init(key2, x)
    y = model.apply(init_variables, x)
    return init_variables, y


def run_attention(nn):
    models = build(nn)
    key1, key2, key3, key4 = random.split(random.key(0), 4)
    x = random.uniform(key1, (3, 13, 64))
    model = functools.partial(
        models['MultiHeadDotProductAttention'],
        broadcast_dropout=False,
        num_heads=2,
        batch_axes=(0,),
    )
    init_variables = model(train=False).init({'params': key2}, x, x)
    y = model(train=True).apply(init_variables, x, x, rngs={'dropout': key4})
    return init_variables, y


def run_scan(nn):
    models = build(nn)
    key1, key2 = random.split(random.key(0), 2)
    xs = random.uniform(key1, (1, 5, 2))
    model = models['SimpleScan'](2)
    init_variables = model.init(key2, xs)
    y = model.apply(init_variables, xs)
    return init_variables, y


def test_jit_mlp_runs_and_gives_the_documented_shapes(capsys):
    variables, y = run_mlp(linen_nn, 'MLP')
    print('initialized parameter shapes:\n', shapes(as_dict(variables)))
    print('output:\n', y)
    assert shapes(as_dict(variables)) == MLP_SHAPES
    assert y.shape == (4, 5)
    # the same parameters as the same MLP without nn.jit
    plain, _ = run_mlp(linen_nn, 'RematMLP')
    for a, b in zip(jax.tree_util.tree_leaves(variables), jax.tree_util.tree_leaves(plain)):
        np.testing.assert_array_equal(a, b)
    assert 'initialized parameter shapes' in capsys.readouterr().out


def test_remat_mlp_runs_and_gives_the_documented_shapes():
    variables, y = run_mlp(linen_nn, 'RematMLP')
    assert shapes(as_dict(variables)) == MLP_SHAPES
    assert y.shape == (4, 5)


def test_vmap_attention_runs_and_gives_the_documented_shapes():
    variables, y = run_attention(linen_nn)
    print('output:\n', y.shape)
    assert y.shape == (3, 13, 2)  # heads land on axis 2, then mean(axis=-2) (as in Flax)
    assert shapes(as_dict(variables)) == {
        'params': {
            'attention': {
                'key': {'kernel': (2, 64, 32)},
                'out': {'bias': (2, 64), 'kernel': (2, 32, 64)},
                'query': {'kernel': (2, 64, 32)},
                'value': {'kernel': (2, 64, 32)},
            }
        }
    }


def test_scan_lstm_runs_and_gives_the_documented_shapes():
    variables, (carry, y) = run_scan(linen_nn)
    assert y.shape == (1, 5, 2)
    assert shapes(as_dict(variables)) == {
        'params': {
            'lstm_cell': {
                name: {'kernel': (2, 2), **({'bias': (2,)} if name[0] == 'h' else {})}
                for name in ('hf', 'hg', 'hi', 'ho', 'if', 'ig', 'ii', 'io')
            }
        }
    }


def assert_same_trees(ours, theirs, rtol=1e-5):
    ours = jax.tree_util.tree_map(np.asarray, as_dict(ours))
    theirs = jax.tree_util.tree_map(np.asarray, dict(theirs))
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(
        jax.tree_util.tree_map(np.asarray, theirs)
    )
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6)


@pytest.mark.flax
@pytest.mark.parametrize(
    'runner',
    [
        functools.partial(run_mlp, name='RematMLP'),
        run_attention,
        run_scan,
    ],
    ids=['remat', 'vmap-attention', 'scan-lstm'],
)
def test_same_params_and_outputs_as_flax(runner):
    flax_nn = pytest.importorskip('flax.linen')
    ours_vars, ours_y = runner(linen_nn)
    flax_vars, flax_y = runner(flax_nn)
    flax_vars = pytest.importorskip('flax').core.unfreeze(flax_vars)
    assert_same_trees(ours_vars, flax_vars)
    for a, b in zip(jax.tree_util.tree_leaves(ours_y), jax.tree_util.tree_leaves(flax_y)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
