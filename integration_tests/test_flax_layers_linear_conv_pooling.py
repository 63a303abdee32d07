"""Flax as an oracle for the linear/conv/embed layers, dropout, pooling, combinators.

For every row, ``linen.nn`` and ``flax.linen`` build the same layer with the same
arguments; the same PRNG key must give the same parameter tree (paths, shapes,
values) and the same outputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

flax_nn = pytest.importorskip('flax.linen')

import linen.nn as linen_nn  # noqa: E402

pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]

KEY = jax.random.key(42)


def _normal(shape, seed=1, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def _ids(shape, n, seed=2):
    return jax.random.randint(jax.random.key(seed), shape, 0, n)


class Row:
    def __init__(self, name, make, inputs, *, kwargs=None, rngs=(), method=None, rtol=1e-6):
        self.name, self.make, self.inputs = name, make, inputs
        self.kwargs, self.rngs, self.method, self.rtol = kwargs or {}, rngs, method, rtol


ROWS = [
    Row('Dense', lambda nn: nn.Dense(5), lambda: (_normal((3, 4)),)),
    Row('Dense_nobias', lambda nn: nn.Dense(5, use_bias=False), lambda: (_normal((2, 3, 4)),)),
    Row(
        'Dense_bias_init',
        lambda nn: nn.Dense(5, bias_init=nn.initializers.normal(1.0)),
        lambda: (_normal((3, 4)),),
    ),
    Row(
        'Dense_bf16',
        lambda nn: nn.Dense(5, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16),
        lambda: (_normal((3, 4)),),
        rtol=1e-2,
    ),
    Row('DenseGeneral', lambda nn: nn.DenseGeneral((2, 3)), lambda: (_normal((4, 5)),)),
    Row(
        'DenseGeneral_axes',
        lambda nn: nn.DenseGeneral((2, 3), axis=(-2, -1), bias_init=nn.initializers.normal(1.0)),
        lambda: (_normal((4, 5, 6)),),
    ),
    Row(
        'DenseGeneral_batch',
        lambda nn: nn.DenseGeneral(
            (3, 2), axis=-1, batch_dims=0, bias_init=nn.initializers.normal(1.0)
        ),
        lambda: (_normal((2, 5, 4)),),
    ),
    Row(
        'DenseGeneral_batch_axes',
        lambda nn: nn.DenseGeneral(7, axis=(1, 3), batch_dims=(0,)),
        lambda: (_normal((2, 3, 4, 5)),),
    ),
    Row('Einsum', lambda nn: nn.Einsum((4, 3, 5), 'abc,cde->abde'), lambda: (_normal((2, 6, 4)),)),
    Row(
        'Einsum_shared_label',
        lambda nn: nn.Einsum((3, 4, 5), 'bhd,hdk->kbh', bias_init=nn.initializers.normal(1.0)),
        lambda: (_normal((2, 3, 4)),),
    ),
    Row(
        'Einsum_call_str',
        lambda nn: nn.Einsum((4, 5)),
        lambda: (_normal((2, 4)),),
        kwargs={'einsum_str': 'ab,bc->ac'},
    ),
    Row('Conv1D', lambda nn: nn.Conv(3, (3,)), lambda: (_normal((2, 9, 4)),)),
    Row('Conv1D_int_kernel', lambda nn: nn.Conv(3, 3), lambda: (_normal((2, 9, 4)),)),
    Row('Conv2D', lambda nn: nn.Conv(5, (3, 3)), lambda: (_normal((2, 7, 7, 4)),)),
    Row('Conv3D', lambda nn: nn.Conv(2, (2, 3, 2)), lambda: (_normal((1, 4, 5, 6, 3)),)),
    Row('Conv_unbatched', lambda nn: nn.Conv(3, (3,)), lambda: (_normal((9, 4)),)),
    Row('Conv_multi_batch', lambda nn: nn.Conv(3, (3, 3)), lambda: (_normal((2, 3, 6, 6, 4)),)),
    Row(
        'Conv_valid_strided',
        lambda nn: nn.Conv(3, (3, 3), strides=2, padding='VALID'),
        lambda: (_normal((2, 9, 9, 4)),),
    ),
    Row(
        'Conv_circular',
        lambda nn: nn.Conv(3, (3, 4), padding='CIRCULAR', kernel_dilation=(1, 2)),
        lambda: (_normal((2, 7, 8, 4)),),
    ),
    Row(
        'Conv_causal',
        lambda nn: nn.Conv(3, (3,), padding='CAUSAL', kernel_dilation=2),
        lambda: (_normal((2, 9, 4)),),
    ),
    Row(
        'Conv_int_padding',
        lambda nn: nn.Conv(3, (3, 3), padding=2),
        lambda: (_normal((2, 6, 6, 4)),),
    ),
    Row(
        'Conv_pair_padding',
        lambda nn: nn.Conv(3, (3, 3), padding=((1, 2), 0)),
        lambda: (_normal((2, 6, 6, 4)),),
    ),
    Row(
        'Conv_dilations',
        lambda nn: nn.Conv(3, (2, 2), padding=1, input_dilation=2, kernel_dilation=(2, 1)),
        lambda: (_normal((2, 5, 5, 4)),),
    ),
    Row(
        'Conv_groups',
        lambda nn: nn.Conv(6, (3,), feature_group_count=2, bias_init=nn.initializers.normal(1.0)),
        lambda: (_normal((2, 8, 4)),),
    ),
    Row(
        'Conv_mask',
        lambda nn: nn.Conv(2, (3,), mask=jnp.tril(jnp.ones((3, 4, 2)))),
        lambda: (_normal((2, 8, 4)),),
    ),
    Row('ConvTranspose1D', lambda nn: nn.ConvTranspose(3, (3,)), lambda: (_normal((2, 6, 4)),)),
    Row(
        'ConvTranspose2D_strided',
        lambda nn: nn.ConvTranspose(3, (3, 3), strides=(2, 2)),
        lambda: (_normal((2, 5, 5, 4)),),
    ),
    Row(
        'ConvTranspose_valid',
        lambda nn: nn.ConvTranspose(3, (4,), strides=(3,), padding='VALID', kernel_dilation=(2,)),
        lambda: (_normal((2, 5, 4)),),
    ),
    Row(
        'ConvTranspose_transpose_kernel',
        lambda nn: nn.ConvTranspose(3, (3, 2), strides=(2, 1), transpose_kernel=True),
        lambda: (_normal((2, 5, 4, 4)),),
    ),
    Row(
        'ConvTranspose_circular',
        lambda nn: nn.ConvTranspose(3, (4,), strides=(2,), padding='CIRCULAR'),
        lambda: (_normal((2, 5, 4)),),
    ),
    Row(
        'ConvTranspose_circular_tk',
        lambda nn: nn.ConvTranspose(
            3, (3, 4), strides=(3, 2), padding='CIRCULAR', transpose_kernel=True
        ),
        lambda: (_normal((2, 5, 3, 4)),),
    ),
    Row(
        'ConvTranspose_unbatched_mask',
        lambda nn: nn.ConvTranspose(2, (3,), mask=jnp.triu(jnp.ones((3, 4, 2)))),
        lambda: (_normal((6, 4)),),
    ),
    Row('ConvLocal1D', lambda nn: nn.ConvLocal(3, (3,)), lambda: (_normal((2, 8, 4)),)),
    Row(
        'ConvLocal2D',
        lambda nn: nn.ConvLocal(3, (3, 2), strides=(2, 1), padding='VALID'),
        lambda: (_normal((2, 7, 6, 4)),),
    ),
    Row('Embed', lambda nn: nn.Embed(11, 4), lambda: (_ids((3, 5), 11),)),
    Row('Embed_one', lambda nn: nn.Embed(1, 4), lambda: (jnp.array([0, 0, 1]),)),
    Row(
        'Embed_attend',
        lambda nn: nn.Embed(11, 4),
        lambda: (_normal((3, 4)),),
        method='attend',
    ),
    Row('PReLU', lambda nn: nn.PReLU(negative_slope_init=0.2), lambda: (_normal((3, 4)),)),
    Row(
        'Dropout',
        lambda nn: nn.Dropout(0.3),
        lambda: (_normal((4, 6)),),
        kwargs={'deterministic': False},
        rngs=('dropout',),
    ),
    Row(
        'Dropout_broadcast',
        lambda nn: nn.Dropout(0.5, broadcast_dims=(0,), deterministic=False),
        lambda: (_normal((4, 6)),),
        rngs=('dropout',),
    ),
    Row(
        'Dropout_rate1',
        lambda nn: nn.Dropout(1.0, deterministic=False),
        lambda: (_normal((4, 6)),),
        rngs=('dropout',),
    ),
    Row(
        'Sequential',
        lambda nn: nn.Sequential(
            [nn.Dense(4), nn.relu, nn.Dense(2), nn.Dropout(0.5, deterministic=False)]
        ),
        lambda: (_normal((3, 5)),),
        rngs=('dropout',),
    ),
    # Layers made inline by the functions Sequential calls: its __call__ is compact.
    Row(
        'Sequential of inline layers',
        lambda nn: nn.Sequential(
            [lambda x: nn.Dense(x.shape[-1])(x), nn.relu, lambda x: nn.Dense(2)(x)]
        ),
        lambda: (_normal((3, 5)),),
    ),
]


def _run(nn, row):
    module = row.make(nn)
    inputs = row.inputs()
    init_rngs = {'params': KEY, **{s: jax.random.fold_in(KEY, i) for i, s in enumerate(row.rngs)}}
    apply_rngs = {s: jax.random.fold_in(KEY, 7 + i) for i, s in enumerate(row.rngs)}
    method = getattr(type(module), row.method) if row.method else None
    variables = module.init(init_rngs, *inputs, method=method, **row.kwargs)
    out = module.apply(variables, *inputs, rngs=apply_rngs, method=method, **row.kwargs)
    return variables, out


def _paths(tree):
    return {
        jax.tree_util.keystr(path): leaf for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
    }


@pytest.mark.parametrize('row', ROWS, ids=lambda r: r.name)
def test_same_params_and_outputs_as_flax(row):
    ours_vars, ours_out = _run(linen_nn, row)
    flax_vars, flax_out = _run(flax_nn, row)

    ours, theirs = _paths(ours_vars), _paths(flax_vars)
    assert sorted(ours) == sorted(theirs)
    for path, leaf in theirs.items():
        assert ours[path].shape == leaf.shape, path
        assert ours[path].dtype == leaf.dtype, path
        np.testing.assert_array_equal(np.asarray(ours[path]), np.asarray(leaf), err_msg=path)

    assert jnp.result_type(ours_out) == jnp.result_type(flax_out)
    np.testing.assert_allclose(
        np.asarray(ours_out, np.float32),
        np.asarray(flax_out, np.float32),
        rtol=row.rtol,
        atol=row.rtol,
    )


POOL_CASES = [
    ('max_pool', dict(window_shape=(2, 2))),
    ('max_pool', dict(window_shape=(3, 2), strides=(2, 1), padding='SAME')),
    ('min_pool', dict(window_shape=(2, 3), padding=((1, 0), (2, 1)))),
    ('avg_pool', dict(window_shape=(3, 3), strides=(2, 2), padding='SAME')),
    ('avg_pool', dict(window_shape=(3, 3), padding='SAME', count_include_pad=False)),
    ('avg_pool', dict(window_shape=(2, 2), padding=((1, 1), (0, 1)), count_include_pad=False)),
    # lax reads its padding strings in any case, so Flax's pools take 'same'.
    ('max_pool', dict(window_shape=(3, 2), strides=(2, 1), padding='same')),
    ('avg_pool', dict(window_shape=(2, 3), padding='valid', count_include_pad=False)),
]


@pytest.mark.parametrize('shape', [(2, 6, 7, 3), (6, 7, 3), (2, 2, 6, 7, 3)], ids=str)
@pytest.mark.parametrize('fn,kwargs', POOL_CASES, ids=lambda c: str(c))
def test_pooling_matches_flax(fn, kwargs, shape):
    if len(shape) > 4 and not isinstance(kwargs.get('padding', 'VALID'), str):
        pytest.skip('flax.linen.pool fails on explicit padding with several batch axes')
    x = _normal(shape)
    ours = getattr(linen_nn, fn)(x, **kwargs)
    theirs = getattr(flax_nn.pooling, fn)(x, **kwargs)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6, atol=1e-6)


def test_pool_with_custom_reduction_matches_flax():
    x = _normal((2, 5, 3))
    ours = linen_nn.pool(x, 1.0, jax.lax.mul, (2,), (1,), 'VALID')
    theirs = flax_nn.pool(x, 1.0, jax.lax.mul, (2,), (1,), 'VALID')
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)


@pytest.mark.parametrize(
    'name',
    [
        'relu',
        'gelu',
        'silu',
        'swish',
        'softmax',
        'log_softmax',
        'one_hot',
        'tanh',
        'normalize',
        'standardize',
        'logsumexp',
        'hard_tanh',
        'celu',
        'glu',
    ],
)
def test_activations_are_flax_functions(name):
    x = _normal((4, 6)) if name != 'one_hot' else jnp.array([0, 2, 1])
    args = (x, 3) if name == 'one_hot' else (x,)
    np.testing.assert_allclose(
        np.asarray(getattr(linen_nn, name)(*args)),
        np.asarray(getattr(flax_nn, name)(*args)),
        rtol=1e-6,
    )


def test_initializers_match_flax():
    for name in ['lecun_normal', 'glorot_uniform', 'he_normal', 'orthogonal', 'zeros_init']:
        ours = getattr(linen_nn.initializers, name)()(KEY, (4, 5))
        theirs = getattr(flax_nn.initializers, name)()(KEY, (4, 5))
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_batch_apply_matches_flax():
    x = _normal((3, 4, 5))
    f = lambda a: (a.sum(-1), a * 2)
    ours = linen_nn.BatchApply(f)(x)
    theirs = flax_nn.BatchApply(f)(x)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))


def test_promote_dtype_matches_flax():
    args = (jnp.ones(2, jnp.bfloat16), None, jnp.ones(2, jnp.int32))
    for dtype in (None, jnp.float16):
        ours = linen_nn.dtypes.promote_dtype(*args, dtype=dtype)
        theirs = flax_nn.dtypes.promote_dtype(*args, dtype=dtype)
        assert [None if a is None else a.dtype for a in ours] == [
            None if b is None else b.dtype for b in theirs
        ]


# Contractions under eager transformations (jax.grad / jax.vmap / jax.jvp outside jit),
# where Flax's layer runs its primitives op by op. Inputs of rank 3 and more and odd
# widths: there, with JAX 0.12, a product differentiated as one compiled call gave a
# kernel gradient that differed in its last bits.
CONTRACTIONS = {
    'Dense-3d-99': (lambda nn: nn.Dense(99), (2, 7, 32)),
    'Dense-4d-128': (lambda nn: nn.Dense(128), (2, 3, 5, 32)),
    'Dense-2d': (lambda nn: nn.Dense(33), (14, 32)),
    'Dense-precision-pair': (
        lambda nn: nn.Dense(99, precision=(jax.lax.Precision.HIGHEST,) * 2),
        (2, 7, 32),
    ),
    'DenseGeneral-3d-99': (lambda nn: nn.DenseGeneral(99), (2, 7, 32)),
    'DenseGeneral-axes': (lambda nn: nn.DenseGeneral((4, 25), axis=(-2, -1)), (2, 7, 8, 16)),
    'Conv-1d': (lambda nn: nn.Conv(33, (3,)), (2, 17, 16)),
    'Conv-2d-strided': (
        lambda nn: nn.Conv(64, (3, 3), strides=2, padding='VALID'),
        (2, 11, 11, 16),
    ),
    'ConvTranspose-2d': (lambda nn: nn.ConvTranspose(33, (3, 3)), (2, 9, 9, 16)),
    'Einsum': (lambda nn: nn.Einsum((32, 99), 'btd,df->btf'), (2, 7, 32)),
}


def _eager_transforms(nn, make, shape):
    module = make(nn)
    x = _normal(shape)
    variables = module.init(KEY, x)

    def loss(v, x):
        return jnp.sum(jnp.sin(module.apply(v, x)))

    tangent = jax.tree_util.tree_map(jnp.ones_like, variables)
    return {
        'grad': jax.grad(loss, argnums=(0, 1))(variables, x),
        'vmap': jax.vmap(lambda x: module.apply(variables, x))(x[None]),
        'jvp': jax.jvp(lambda v: module.apply(v, x), (variables,), (tangent,)),
        'grad of vmap': jax.grad(lambda v: jnp.sum(jax.vmap(lambda x: loss(v, x))(x[None])))(
            variables
        ),
    }


@pytest.mark.parametrize('name', sorted(CONTRACTIONS))
def test_contractions_under_eager_transforms_are_flax_bit_for_bit(name):
    make, shape = CONTRACTIONS[name]
    ours, theirs = _eager_transforms(linen_nn, make, shape), _eager_transforms(flax_nn, make, shape)
    for what in theirs:
        mine, flax = _paths(ours[what]), _paths(theirs[what])
        assert sorted(mine) == sorted(flax), what
        for path, leaf in flax.items():
            np.testing.assert_array_equal(
                np.asarray(mine[path]), np.asarray(leaf), err_msg=f'{name}: {what} {path}'
            )
