"""Flax as the oracle for every layer, with and without batch axes, across ``dtype`` and
``param_dtype``.

One table: each row builds the layer from ``nn`` (``flax.linen`` or ``linen.nn``) with the
dtype keywords of the variant, and gives its inputs unbatched (the layer's minimal rank)
or with batch axes. Same variables bit for bit, same output dtype and shape, outputs equal
up to the rounding of the computation dtype.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

flax_nn = pytest.importorskip('flax.linen')

import linen.nn as linen_nn  # noqa: E402

pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]

KEY = jax.random.key(5)


def _normal(shape, seed=1):
    return jax.random.normal(jax.random.key(seed), shape) + 0.5


def _ids(shape):
    return jax.random.randint(jax.random.key(2), shape, 0, 7)


@dataclass
class Row:
    name: str
    make: Any  # (nn, **dtype_kwargs) -> module
    inputs: Any  # (batched: bool) -> tuple of arrays
    kwargs: dict = field(default_factory=dict)
    mutable: tuple = ()
    dtype_kwargs: tuple = ('dtype', 'param_dtype')
    # Flax's RNN needs a carry whose dtype the step keeps: its initial carry is param_dtype,
    # so bf16 params (or a cell that returns its compute dtype) fail in Flax's scan.
    variants: tuple = ('bf16-compute', 'bf16-params')


def _rnn(cell, *args):
    return lambda nn, **kw: nn.RNN(getattr(nn, cell)(*args, **kw))


_RNN_VARIANTS = ('bf16-compute',)


ROWS = [
    Row(
        'Dense', lambda nn, **kw: nn.Dense(3, **kw), lambda b: (_normal((2, 3, 4) if b else (4,)),)
    ),
    Row(
        'DenseGeneral',
        lambda nn, **kw: nn.DenseGeneral((2, 3), axis=-1, **kw),
        lambda b: (_normal((2, 4) if b else (4,)),),
    ),
    Row(
        'Einsum',
        lambda nn, **kw: nn.Einsum((4, 3), '...a,ab->...b', **kw),
        lambda b: (_normal((2, 3, 4) if b else (4,)),),
    ),
    Row('Embed', lambda nn, **kw: nn.Embed(7, 3, **kw), lambda b: (_ids((2, 5) if b else ()),)),
    Row(
        'Conv',
        lambda nn, **kw: nn.Conv(3, (3,), **kw),
        lambda b: (_normal((2, 2, 6, 4) if b else (6, 4)),),
    ),
    Row(
        'ConvTranspose',
        lambda nn, **kw: nn.ConvTranspose(3, (3,), strides=(2,), **kw),
        lambda b: (_normal((2, 6, 4) if b else (6, 4)),),
    ),
    Row(
        'ConvLocal',
        lambda nn, **kw: nn.ConvLocal(3, (3,), **kw),
        lambda b: (_normal((2, 6, 4) if b else (6, 4)),),
    ),
    Row(
        'LayerNorm',
        lambda nn, **kw: nn.LayerNorm(**kw),
        lambda b: (_normal((2, 3, 6) if b else (6,)),),
    ),
    Row('RMSNorm', lambda nn, **kw: nn.RMSNorm(**kw), lambda b: (_normal((2, 6) if b else (6,)),)),
    Row(
        'GroupNorm',
        lambda nn, **kw: nn.GroupNorm(num_groups=2, **kw),
        lambda b: (_normal((2, 3, 6) if b else (3, 6)),),
    ),
    Row(
        'InstanceNorm',
        lambda nn, **kw: nn.InstanceNorm(**kw),
        lambda b: (_normal((2, 3, 6) if b else (3, 6)),),
    ),
    Row(
        'BatchNorm',
        lambda nn, **kw: nn.BatchNorm(use_running_average=False, **kw),
        lambda b: (_normal((2, 3, 6) if b else (3, 6)),),
        mutable=('batch_stats',),
    ),
    Row(
        'MultiHeadDotProductAttention',
        lambda nn, **kw: nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=4, **kw),
        lambda b: (_normal((2, 3, 4) if b else (3, 4)),),
    ),
    Row(
        'PReLU',
        lambda nn, **kw: nn.PReLU(**kw),
        lambda b: (_normal((2, 3) if b else (3,)),),
        dtype_kwargs=('param_dtype',),
    ),
    Row(
        'SpectralNorm',
        lambda nn, **kw: nn.SpectralNorm(nn.Dense(3), **kw),
        lambda b: (_normal((2, 4) if b else (4,)),),
        kwargs={'update_stats': True},
        mutable=('batch_stats',),
    ),
    Row(
        'WeightNorm',
        lambda nn, **kw: nn.WeightNorm(nn.Dense(3), **kw),
        lambda b: (_normal((2, 4) if b else (4,)),),
    ),
    Row(
        'RNN-LSTMCell',
        _rnn('LSTMCell', 3),
        lambda b: (_normal((2, 5, 4) if b else (5, 4)),),
        variants=_RNN_VARIANTS,
    ),
    Row(
        'RNN-OptimizedLSTMCell',
        _rnn('OptimizedLSTMCell', 3),
        lambda b: (_normal((2, 5, 4) if b else (5, 4)),),
        variants=_RNN_VARIANTS,
    ),
    Row(
        'RNN-GRUCell',
        _rnn('GRUCell', 3),
        lambda b: (_normal((2, 5, 4) if b else (5, 4)),),
        variants=_RNN_VARIANTS,
    ),
    Row(
        'RNN-MGUCell',
        _rnn('MGUCell', 3),
        lambda b: (_normal((2, 5, 4) if b else (5, 4)),),
        variants=_RNN_VARIANTS,
    ),
    Row(
        'RNN-SimpleCell',
        _rnn('SimpleCell', 3),
        lambda b: (_normal((2, 5, 4) if b else (5, 4)),),
        variants=('default',),
    ),
    Row(
        'RNN-ConvLSTMCell',
        _rnn('ConvLSTMCell', 2, (3,)),
        lambda b: (_normal((2, 4, 6, 3) if b else (4, 6, 3)),),
        variants=_RNN_VARIANTS,
    ),
]

VARIANTS = {
    'default': {},
    'bf16-compute': {'dtype': jnp.bfloat16},
    'bf16-params': {'param_dtype': jnp.bfloat16},
    'bf16-both': {'dtype': jnp.bfloat16, 'param_dtype': jnp.bfloat16},
    'f16-params-f32-compute': {'dtype': jnp.float32, 'param_dtype': jnp.float16},
}

# Each row runs unbatched with the default dtypes and batched with its variants (float32
# batched runs are in the test_flax_layers_<family> files; the last variant is one
# sweep over all rows).
CASES = (
    [(row, 'default', False) for row in ROWS]
    + [(row, variant, True) for row in ROWS for variant in row.variants]
    + [(row, 'f16-params-f32-compute', True) for row in ROWS[:3]]
    + [(row, 'bf16-both', True) for row in ROWS[3:12]]
)


def _tolerance(*dtypes):
    # Both sides compute the same ops; allow the rounding of the narrowest dtype involved.
    eps = max(float(jnp.finfo(d).eps) for d in dtypes if jnp.issubdtype(d, jnp.floating))
    return 4 * eps


def _run(nn, row, variant, batched):
    kwargs = {k: v for k, v in VARIANTS[variant].items() if k in row.dtype_kwargs}
    module = row.make(nn, **kwargs)
    inputs = row.inputs(batched)
    variables = module.init(KEY, *inputs, **row.kwargs)
    out = module.apply(variables, *inputs, mutable=list(row.mutable), **row.kwargs)
    if row.mutable:
        out, updates = out
        variables = {**variables, **updates}
    return variables, out


@pytest.mark.parametrize(
    'row,variant,batched',
    CASES,
    ids=[f'{r.name}-{v}-{"batched" if b else "unbatched"}' for r, v, b in CASES],
)
def test_layer_matches_flax(row, variant, batched):
    ours_vars, ours_out = _run(linen_nn, row, variant, batched)
    flax_vars, flax_out = _run(flax_nn, row, variant, batched)
    ours = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(ours_vars)}
    theirs = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(flax_vars)}
    assert sorted(ours) == sorted(theirs)
    dtypes = [jnp.float32]
    for path, leaf in theirs.items():
        assert ours[path].shape == leaf.shape and ours[path].dtype == leaf.dtype, path
        if 'params' in path:
            np.testing.assert_array_equal(np.asarray(ours[path]), np.asarray(leaf), err_msg=path)
        dtypes.append(leaf.dtype)
    out_a, tree_a = jax.tree_util.tree_flatten(ours_out)
    out_b, tree_b = jax.tree_util.tree_flatten(flax_out)
    assert tree_a == tree_b
    for a, b in zip(out_a, out_b):
        assert a.dtype == b.dtype and a.shape == b.shape
        dtypes.append(b.dtype)
    tol = _tolerance(*dtypes)
    for a, b in zip(out_a, out_b):
        np.testing.assert_allclose(
            np.asarray(a, np.float32), np.asarray(b, np.float32), rtol=tol, atol=tol
        )
    # Statistics (batch_stats, spectral-norm vectors) follow the same computation.
    for path, leaf in theirs.items():
        if 'params' not in path:
            np.testing.assert_allclose(
                np.asarray(ours[path], np.float32),
                np.asarray(leaf, np.float32),
                rtol=tol,
                atol=tol,
                err_msg=path,
            )
