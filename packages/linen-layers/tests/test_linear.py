"""Dense, DenseGeneral, Einsum, Conv, ConvTranspose, ConvLocal, Embed against plain numpy."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.core.errors import ScopeParamShapeError
from linen.layers import (
    Conv,
    ConvLocal,
    ConvTranspose,
    Dense,
    DenseGeneral,
    Einsum,
    Embed,
    Sequential,
)
from linen.layers import initializers as init
from linen.layers.errors import (
    LayerArgumentError,
    LayerInputDtypeError,
    LayerInputRankError,
    LayerInputShapeError,
    LayerMaskShapeError,
    LayerPaddingError,
)

KEY = jax.random.key(0)


def normal(shape, seed=1, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def shapes(tree):
    return jax.tree_util.tree_map(jnp.shape, tree)


def np64(x):
    return np.asarray(x, np.float64)


# --------------------------------------------------------------------------- numpy references


def np_conv(x, k, strides, pads, kernel_dilation=None, input_dilation=None, groups=1):
    """Channels-last N-D convolution by explicit loops over kernel offsets (batched x)."""
    x, k = np64(x), np64(k)
    n = k.ndim - 2
    kernel_dilation = kernel_dilation or (1,) * n
    input_dilation = input_dilation or (1,) * n
    # Dilate the input by inserting zeros.
    dil_shape = [x.shape[0]] + [(s - 1) * d + 1 for s, d in zip(x.shape[1:-1], input_dilation)]
    xd = np.zeros([*dil_shape, x.shape[-1]])
    xd[(slice(None), *(slice(None, None, d) for d in input_dilation))] = x
    xp = np.pad(xd, [(0, 0), *pads, (0, 0)])
    eff = [(kk - 1) * d + 1 for kk, d in zip(k.shape[:n], kernel_dilation)]
    out_sp = [(xp.shape[1 + i] - eff[i]) // strides[i] + 1 for i in range(n)]
    in_per_group, out_f = k.shape[-2], k.shape[-1]
    out_per_group = out_f // groups
    y = np.zeros([x.shape[0], *out_sp, out_f])
    for pos in itertools.product(*(range(o) for o in out_sp)):
        for off in itertools.product(*(range(kk) for kk in k.shape[:n])):
            idx = tuple(p * s + o * d for p, s, o, d in zip(pos, strides, off, kernel_dilation))
            patch = xp[(slice(None), *idx)]  # (B, C)
            for g in range(groups):
                xs = patch[:, g * in_per_group : (g + 1) * in_per_group]
                ks = k[(*off, slice(None), slice(g * out_per_group, (g + 1) * out_per_group))]
                y[(slice(None), *pos, slice(g * out_per_group, (g + 1) * out_per_group))] += xs @ ks
    return y


def np_conv_transpose_full(x, k, strides, kernel_dilation=None):
    """The VALID transposed convolution: every input position scatters a kernel copy."""
    x, k = np64(x), np64(k)
    n = k.ndim - 2
    kernel_dilation = kernel_dilation or (1,) * n
    eff = [(kk - 1) * d + 1 for kk, d in zip(k.shape[:n], kernel_dilation)]
    out_sp = [(s - 1) * st + e for s, st, e in zip(x.shape[1:-1], strides, eff)]
    y = np.zeros([x.shape[0], *out_sp, k.shape[-1]])
    for pos in itertools.product(*(range(s) for s in x.shape[1:-1])):
        for off in itertools.product(*(range(kk) for kk in k.shape[:n])):
            idx = tuple(p * st + o * d for p, st, o, d in zip(pos, strides, off, kernel_dilation))
            y[(slice(None), *idx)] += x[(slice(None), *pos)] @ k[off]
    return y


# --------------------------------------------------------------------------- Dense


def test_dense_output_and_params():
    x = normal((3, 4))
    layer = Dense(5, bias_init=init.normal(1.0))
    variables = layer.init(KEY, x)
    assert shapes(variables) == {'params': {'kernel': (4, 5), 'bias': (5,)}}
    p = variables['params']
    expected = np64(x) @ np64(p['kernel']) + np64(p['bias'])
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_dense_without_bias_and_leading_axes():
    x = normal((2, 3, 4))
    layer = Dense(5, use_bias=False)
    variables = layer.init(KEY, x)
    assert shapes(variables) == {'params': {'kernel': (4, 5)}}
    expected = np.einsum('abi,io->abo', np64(x), np64(variables['params']['kernel']))
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_dense_eager_matches_traced_and_traced_program_is_plain():
    """Eagerly the bias is added by one compiled call; values are those of the traced
    layer bit for bit, and the traced program holds no nested call, only the ops."""
    x = normal((3, 4))
    layer = Dense(5, bias_init=init.normal(1.0))
    variables = layer.init(KEY, x)
    p = variables['params']
    eager = layer.apply(variables, x)
    # The same two eager dispatches in plain JAX: the same bits on any backend.
    np.testing.assert_array_equal(eager, x @ p['kernel'] + p['bias'].reshape(1, 5))
    # Compiled whole, XLA may fuse the add into the matmul: float32 rounding apart.
    np.testing.assert_allclose(eager, jax.jit(layer.apply)(variables, x), rtol=1e-6, atol=1e-6)
    jaxpr = jax.make_jaxpr(layer.apply)(variables, x)
    assert [e.primitive.name for e in jaxpr.eqns] == ['dot_general', 'reshape', 'add']
    # Leading axes and bfloat16: the bias gets the output's rank, the dtype is kept.
    xb = normal((2, 3, 4), dtype=jnp.bfloat16)
    layer = Dense(5, dtype=jnp.bfloat16, bias_init=init.normal(1.0))
    variables = layer.init(KEY, xb)
    out = layer.apply(variables, xb)
    assert out.dtype == jnp.bfloat16 and out.shape == (2, 3, 5)
    pb = variables['params']
    expected = xb @ pb['kernel'].astype(jnp.bfloat16) + pb['bias'].astype(jnp.bfloat16).reshape(
        1, 1, 5
    )
    np.testing.assert_array_equal(out, expected)


def test_dense_default_kernel_init_is_lecun_normal():
    variables = Dense(3).init(KEY, jnp.ones((1, 4)))
    # The root module's first param draw uses the key the PRNG rule gives; check the
    # law rather than the key: lecun_normal has std 1/sqrt(fan_in) (truncated).
    big = Dense(400).init(KEY, jnp.ones((1, 400)))['params']['kernel']
    assert abs(float(jnp.std(big)) - 1 / np.sqrt(400)) < 0.1 / np.sqrt(400)
    np.testing.assert_array_equal(variables['params']['bias'], np.zeros(3))


@pytest.mark.parametrize(
    'dtype,param_dtype,x_dtype,out_dtype',
    [
        (None, jnp.float32, jnp.bfloat16, jnp.float32),
        (jnp.bfloat16, jnp.float32, jnp.float32, jnp.bfloat16),
        (None, jnp.bfloat16, jnp.bfloat16, jnp.bfloat16),
        (None, jnp.float32, jnp.int32, jnp.float32),
    ],
)
def test_dense_dtypes(dtype, param_dtype, x_dtype, out_dtype):
    x = jnp.arange(8).reshape(2, 4).astype(x_dtype)
    layer = Dense(3, dtype=dtype, param_dtype=param_dtype)
    variables = layer.init(KEY, x)
    assert variables['params']['kernel'].dtype == param_dtype
    y = layer.apply(variables, x)
    assert y.dtype == out_dtype
    expected = np64(x) @ np64(variables['params']['kernel'])
    np.testing.assert_allclose(np64(y), expected, rtol=2e-2, atol=2e-2)


def test_dense_dot_general_override_and_cls():
    calls = []

    def doubled_dot(lhs, rhs, dims, precision=None):
        calls.append(dims)
        return 2 * jax.lax.dot_general(lhs, rhs, dims, precision=precision)

    class DotCls:
        def __call__(self, lhs, rhs, dims, precision=None):
            return 3 * jax.lax.dot_general(lhs, rhs, dims, precision=precision)

    x = normal((2, 4))
    variables = Dense(3, use_bias=False).init(KEY, x)
    plain = x @ variables['params']['kernel']
    y2 = Dense(3, use_bias=False, dot_general=doubled_dot).apply(variables, x)
    y3 = Dense(3, use_bias=False, dot_general=doubled_dot, dot_general_cls=DotCls).apply(
        variables, x
    )
    np.testing.assert_allclose(y2, 2 * plain, rtol=1e-6)
    np.testing.assert_allclose(y3, 3 * plain, rtol=1e-6)  # the class wins
    assert calls == [(((1,), (0,)), ((), ()))]


def test_dense_mismatched_features_on_apply():
    variables = Dense(3).init(KEY, jnp.ones((1, 4)))
    with pytest.raises(ScopeParamShapeError, match='kernel'):
        Dense(3).apply(variables, jnp.ones((1, 5)))


def test_dense_scalar_input_is_rank_error():
    with pytest.raises(LayerInputRankError, match=r'Dense expected an input of rank >= 1'):
        Dense(3).init(KEY, jnp.float32(1.0))


# --------------------------------------------------------------------------- DenseGeneral


def test_dense_general_multiple_axes_and_features():
    x = normal((4, 5, 6))
    layer = DenseGeneral((2, 3), axis=(-2, -1), bias_init=init.normal(1.0))
    variables = layer.init(KEY, x)
    assert shapes(variables['params']) == {'kernel': (5, 6, 2, 3), 'bias': (2, 3)}
    p = variables['params']
    expected = np.einsum('aij,ijkl->akl', np64(x), np64(p['kernel'])) + np64(p['bias'])
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_dense_general_batch_dims():
    x = normal((2, 3, 4, 5))
    layer = DenseGeneral(7, axis=(1, 3), batch_dims=(0,), bias_init=init.normal(1.0))
    variables = layer.init(KEY, x)
    p = variables['params']
    assert shapes(p) == {'kernel': (2, 3, 5, 7), 'bias': (2, 7)}
    expected = np.einsum('bicj,bijo->bco', np64(x), np64(p['kernel']))
    expected += np64(p['bias'])[:, None, :]
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_dense_general_kernel_init_sees_flat_fans():
    seen = []

    def recording_init(key, shape, dtype=jnp.float32):
        seen.append(shape)
        return jnp.zeros(shape, dtype)

    DenseGeneral((2, 3), axis=(-2, -1), kernel_init=recording_init).init(KEY, jnp.ones((4, 5, 6)))
    assert seen == [(30, 6)]


def test_dense_general_errors():
    x = jnp.ones((2, 3, 4))
    # Checked for every input shape, including after a valid one (shapes are cached).
    layer = DenseGeneral(3, axis=2)
    variables = layer.init(KEY, x)
    with pytest.raises(LayerInputRankError, match=r'DenseGeneral expected an input of rank > 2'):
        layer.apply(variables, jnp.ones((3, 4)))
    # List-valued axes (unhashable, so never cached) work as tuples do.
    as_list = DenseGeneral((2, 3), axis=[-2, -1], bias_init=init.normal(1.0))
    p = as_list.init(KEY, x)['params']
    assert shapes(p) == {'kernel': (3, 4, 2, 3), 'bias': (2, 3)}
    expected = np.einsum('aij,ijkl->akl', np64(x), np64(p['kernel'])) + np64(p['bias'])
    np.testing.assert_allclose(as_list.apply({'params': p}, x), expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(LayerArgumentError, match=r'batch_dims=\(1,\) are not the leading axes'):
        DenseGeneral(3, batch_dims=(1,)).init(KEY, x)
    with pytest.raises(LayerArgumentError, match='overlaps batch_dims'):
        DenseGeneral(3, axis=0, batch_dims=(0,)).init(KEY, x)
    with pytest.raises(LayerInputRankError, match=r'DenseGeneral expected an input of rank > 4'):
        DenseGeneral(3, axis=4).init(KEY, x)


# --------------------------------------------------------------------------- Einsum


def test_einsum_output_and_bias_layout():
    x = normal((2, 3, 4))
    layer = Einsum((4, 3, 5), 'bhd,dhk->kbh', bias_init=init.normal(1.0))
    variables = layer.init(KEY, x)
    p = variables['params']
    # The bias covers output axes labelled from the kernel (k, h), in output order.
    assert shapes(p) == {'kernel': (4, 3, 5), 'bias': (5, 3)}
    expected = np.einsum('bhd,dhk->kbh', np64(x), np64(p['kernel'])) + np64(p['bias'])[:, None, :]
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_einsum_string_at_call_time_and_no_bias():
    x = normal((2, 4))
    layer = Einsum((4, 5), use_bias=False)
    variables = layer.init(KEY, x, 'ab, bc -> ac')
    expected = np64(x) @ np64(variables['params']['kernel'])
    np.testing.assert_allclose(
        layer.apply(variables, x, einsum_str='ab,bc->ac'), expected, rtol=1e-5, atol=1e-5
    )


def test_einsum_errors():
    x = jnp.ones((2, 4))
    with pytest.raises(LayerArgumentError, match='is not of the form'):
        Einsum((4, 5), 'ab->a').init(KEY, x)
    with pytest.raises(LayerArgumentError, match='is not of the form'):
        Einsum((4, 5), 'ab,bc,cd->ad').init(KEY, x)
    with pytest.raises(LayerArgumentError, match='do not match shape'):
        Einsum((4, 5, 6), 'ab,bc->ac').init(KEY, x)
    with pytest.raises(LayerInputRankError, match='Einsum expected an input of rank 3'):
        Einsum((4, 5), 'abc,cd->abd').init(KEY, x)


@pytest.mark.parametrize(
    'equation,kernel_shape,x_shape,bias_shape',
    [
        ('...d,dk->...k', (4, 5), (2, 3, 4), (5,)),
        ('...d,dk->...k', (4, 5), (4,), (5,)),
        ('b...d,...dk->b...k', (3, 4, 5), (2, 3, 4), (3, 5)),
    ],
)
def test_einsum_ellipsis(equation, kernel_shape, x_shape, bias_shape):
    x = normal(x_shape)
    layer = Einsum(kernel_shape, equation, bias_init=init.normal(1.0))
    variables = layer.init(KEY, x)
    p = variables['params']
    # Ellipsis axes shared with the kernel are bias axes too (they come from the kernel).
    assert shapes(p) == {'kernel': kernel_shape, 'bias': bias_shape}
    y = np.einsum(equation, np64(x), np64(p['kernel']))
    bias = np64(p['bias']).reshape((1,) * (y.ndim - len(bias_shape)) + bias_shape)
    np.testing.assert_allclose(layer.apply(variables, x), y + bias, rtol=1e-5, atol=1e-5)


def test_einsum_ellipsis_errors():
    x = jnp.ones((2, 4))
    with pytest.raises(LayerArgumentError, match='at most once per term'):
        Einsum((4, 5), '......d,dk->k').init(KEY, x)
    with pytest.raises(LayerInputRankError, match='rank >= 3'):
        Einsum((4, 5), 'ab...d,dk->...k').init(KEY, x)
    with pytest.raises(LayerArgumentError, match='do not match shape'):
        Einsum((5,), 'd,...dk->...k').init(KEY, x[0])


# --------------------------------------------------------------------------- Conv


CONV_CASES = [
    # (kernel_size, kwargs, input shape, explicit padding for the reference)
    ((3,), {}, (2, 8, 4), [(1, 1)]),
    ((4,), {}, (2, 8, 4), [(1, 2)]),  # SAME with an even kernel pads more on the right
    ((3, 3), {'padding': 'VALID', 'strides': 2}, (2, 9, 9, 4), [(0, 0), (0, 0)]),
    ((3, 2), {'padding': ((1, 2), 0)}, (2, 6, 6, 4), [(1, 2), (0, 0)]),
    (
        (2, 2),
        {'padding': 1, 'input_dilation': 2, 'kernel_dilation': (2, 1)},
        (1, 4, 4, 3),
        [(1, 1), (1, 1)],
    ),
    ((3,), {'feature_group_count': 2, 'padding': 'VALID'}, (2, 8, 4), [(0, 0)]),
    ((2, 2, 2), {'padding': 'VALID'}, (1, 3, 4, 3, 2), [(0, 0)] * 3),
]


@pytest.mark.parametrize('kernel_size,kwargs,shape,pads', CONV_CASES)
def test_conv_against_loops(kernel_size, kwargs, shape, pads):
    x = normal(shape)
    layer = Conv(6, kernel_size, bias_init=init.normal(1.0), **kwargs)
    variables = layer.init(KEY, x)
    p = variables['params']
    groups = kwargs.get('feature_group_count', 1)
    assert p['kernel'].shape == (*kernel_size, shape[-1] // groups, 6)
    assert p['bias'].shape == (6,)
    n = len(kernel_size)
    strides = (kwargs.get('strides', 1),) * n
    kd = kwargs.get('kernel_dilation', 1)
    kd = (kd,) * n if isinstance(kd, int) else kd
    idil = (kwargs.get('input_dilation', 1),) * n
    expected = np_conv(x, p['kernel'], strides, pads, kd, idil, groups) + np64(p['bias'])
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-4, atol=1e-4)


def test_conv_circular_padding_wraps():
    x = normal((1, 7, 3))
    layer = Conv(2, (3,), padding='CIRCULAR', use_bias=False)
    variables = layer.init(KEY, x)
    wrapped = np.concatenate([np64(x)[:, -1:], np64(x), np64(x)[:, :1]], axis=1)
    expected = np_conv(wrapped, variables['params']['kernel'], (1,), [(0, 0)])
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_conv_reflect_padding_mirrors():
    x = normal((1, 6, 5, 2))
    layer = Conv(2, (3, 4), padding='REFLECT', use_bias=False)
    variables = layer.init(KEY, x)
    # Mirrored without repeating the edge, (k - 1) // 2 before and k // 2 after.
    padded = np.pad(np64(x), [(0, 0), (1, 1), (1, 2), (0, 0)], mode='reflect')
    expected = np_conv(padded, variables['params']['kernel'], (1, 1), [(0, 0), (0, 0)])
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_conv_causal_padding_sees_only_the_past():
    x = normal((1, 6, 2))
    layer = Conv(3, (3,), padding='CAUSAL', kernel_dilation=2, use_bias=False)
    variables = layer.init(KEY, x)
    expected = np_conv(x, variables['params']['kernel'], (1,), [(4, 0)], (2,))
    y = layer.apply(variables, x)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    # Changing a future input leaves earlier outputs unchanged.
    y2 = layer.apply(variables, x.at[:, 4].set(100.0))
    np.testing.assert_allclose(y2[:, :4], y[:, :4], rtol=1e-6)


def test_conv_unbatched_and_many_batch_axes():
    x = normal((2, 3, 6, 4))
    layer = Conv(5, 3)  # an int kernel_size is a 1-D kernel
    variables = layer.init(KEY, x)
    assert variables['params']['kernel'].shape == (3, 4, 5)
    y = layer.apply(variables, x)
    assert y.shape == (2, 3, 6, 5)
    np.testing.assert_allclose(y[1, 2], layer.apply(variables, x[1, 2]), rtol=1e-6, atol=1e-6)


def test_conv_mask_zeroes_kernel_entries():
    x = normal((1, 5, 2))
    mask = jnp.zeros((3, 2, 4)).at[0].set(1.0)  # only the first tap
    layer = Conv(4, (3,), padding='VALID', mask=mask, use_bias=False)
    variables = layer.init(KEY, x)
    expected = np64(x)[:, :3] @ np64(variables['params']['kernel'][0])
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_conv_override_and_dtype():
    seen = []

    def my_conv(lhs, rhs, strides, padding, **kwargs):
        seen.append((lhs.dtype, rhs.dtype, kwargs['feature_group_count']))
        return jax.lax.conv_general_dilated(lhs, rhs, strides, padding, **kwargs)

    x = normal((1, 5, 2), dtype=jnp.bfloat16)
    layer = Conv(4, (3,), conv_general_dilated=my_conv, dtype=jnp.bfloat16)
    variables = layer.init(KEY, x)
    assert variables['params']['kernel'].dtype == jnp.float32
    assert layer.apply(variables, x).dtype == jnp.bfloat16
    assert seen[-1] == (jnp.bfloat16, jnp.bfloat16, 1)


def test_conv_errors():
    x = jnp.ones((1, 8, 4))
    with pytest.raises(LayerInputRankError, match=r'Conv expected an input of rank >= 3'):
        Conv(2, (3, 3)).init(KEY, jnp.ones((8, 4)))
    with pytest.raises(LayerMaskShapeError, match=r'mask has shape \(2, 4, 2\).*\(3, 4, 2\)'):
        Conv(2, (3,), mask=jnp.ones((2, 4, 2))).init(KEY, x)
    with pytest.raises(LayerPaddingError, match='only 1-D convolutions'):
        Conv(2, (3, 3), padding='CAUSAL').init(KEY, jnp.ones((1, 5, 5, 4)))
    with pytest.raises(LayerPaddingError, match='unknown padding string'):
        Conv(2, (3,), padding='WRAP').init(KEY, x)
    with pytest.raises(RuntimeError, match='Unrecognized padding type'):  # as lax's, under Flax
        Conv(2, (3,), padding='circular').init(KEY, x)
    # lax reads its own padding strings in any case, so Flax (and linen) take 'same'.
    v = Conv(2, (3,), padding='SAME').init(KEY, x)
    assert jnp.array_equal(
        Conv(2, (3,), padding='same').apply(v, x), Conv(2, (3,), padding='SAME').apply(v, x)
    )
    with pytest.raises(LayerPaddingError, match='2 entries for 1 spatial'):
        Conv(2, (3,), padding=[1, 2]).init(KEY, x)
    with pytest.raises(LayerInputShapeError, match='not divisible by feature_group_count=3'):
        Conv(3, (3,), feature_group_count=3).init(KEY, x)
    with pytest.raises(AssertionError):  # Flax asserts
        Conv(3, (3,), feature_group_count=3).init(KEY, x)
    with pytest.raises(LayerArgumentError, match=r'strides=\(1, 2\) has 2 entries'):
        Conv(3, (3,), strides=(1, 2)).init(KEY, x)


def test_error_names_the_module_path():
    model = Sequential([Conv(2, (3, 3))])
    with pytest.raises(LayerInputRankError, match='Conv at "/layers_0"'):
        model.init(KEY, jnp.ones((4, 4)))


# --------------------------------------------------------------------------- ConvTranspose


def test_conv_transpose_valid_against_scatter():
    x = normal((2, 5, 3))
    layer = ConvTranspose(4, (3,), strides=(2,), padding='VALID', bias_init=init.normal(1.0))
    variables = layer.init(KEY, x)
    p = variables['params']
    assert shapes(p) == {'kernel': (3, 3, 4), 'bias': (4,)}
    # Without transpose_kernel the stride-dilated input is correlated with the kernel
    # as stored, which scatters the spatially flipped kernel.
    expected = np_conv_transpose_full(x, p['kernel'][::-1], (2,)) + np64(p['bias'])
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_conv_transpose_same_2d_shape_and_transpose_kernel():
    x = normal((1, 4, 5, 3))
    layer = ConvTranspose(2, (3, 3), strides=(2, 2), transpose_kernel=True, use_bias=False)
    variables = layer.init(KEY, x)
    assert variables['params']['kernel'].shape == (3, 3, 2, 3)
    y = layer.apply(variables, x)
    assert y.shape == (1, 8, 10, 2)
    # With transpose_kernel the layer is the adjoint of the stride-2 Conv with the
    # same kernel: <conv(z), x> == <z, conv_transpose(x)>.
    conv = Conv(3, (3, 3), strides=2, use_bias=False)
    z = normal((1, 8, 10, 2), seed=5)
    lhs = jnp.vdot(conv.apply(variables, z), x)
    rhs = jnp.vdot(z, y)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-4)


def test_conv_transpose_circular_has_period_output():
    x = normal((1, 5, 2))
    layer = ConvTranspose(3, (4,), strides=(2,), padding='CIRCULAR', use_bias=False)
    variables = layer.init(KEY, x)
    y = layer.apply(variables, x)
    assert y.shape == (1, 10, 3)
    full = np_conv_transpose_full(x, variables['params']['kernel'], (2,))  # length 12
    # Folding the full output modulo the period preserves the total.
    np.testing.assert_allclose(np64(y).sum(1), full.sum(1), rtol=1e-5, atol=1e-5)
    # Shifting the input by one step shifts the output by one stride, circularly.
    y_shift = layer.apply(variables, jnp.roll(x, 1, axis=1))
    np.testing.assert_allclose(y_shift, jnp.roll(y, 2, axis=1), rtol=1e-5, atol=1e-5)


def test_conv_transpose_errors():
    x = jnp.ones((1, 6, 4))
    with pytest.raises(LayerMaskShapeError, match='mask has shape'):
        ConvTranspose(2, (3,), mask=jnp.ones((3, 2, 4))).init(KEY, x)
    with pytest.raises(LayerPaddingError, match='no causal form'):
        ConvTranspose(2, (3,), padding='CAUSAL').init(KEY, x)
    with pytest.raises(LayerInputRankError, match='ConvTranspose expected an input of rank >= 3'):
        ConvTranspose(2, (3, 3)).init(KEY, x[0])


# --------------------------------------------------------------------------- ConvLocal


def test_conv_local_against_loops():
    x = normal((2, 6, 3))
    layer = ConvLocal(4, (3,), padding='VALID', bias_init=init.normal(1.0))
    variables = layer.init(KEY, x)
    p = variables['params']
    assert shapes(p) == {'kernel': (4, 9, 4), 'bias': (4, 4)}
    k = np64(p['kernel'])
    expected = np.zeros((2, 4, 4))
    for o in range(4):
        # The fused input axis is laid out feature-major: index = c * kernel + tap.
        patch = np64(x)[:, o : o + 3, :].transpose(0, 2, 1).reshape(2, 9)
        expected[:, o] = patch @ k[o]
    expected += np64(p['bias'])
    np.testing.assert_allclose(layer.apply(variables, x), expected, rtol=1e-5, atol=1e-5)


def test_conv_local_rejects_groups():
    with pytest.raises(LayerArgumentError, match='not supported by a local convolution'):
        ConvLocal(4, (3,), feature_group_count=2).init(KEY, jnp.ones((1, 6, 4)))


# --------------------------------------------------------------------------- Embed


def test_embed_lookup_and_attend():
    ids = jnp.array([[0, 3], [9, 3]])
    layer = Embed(10, 4)
    variables = layer.init(KEY, ids)
    table = np64(variables['params']['embedding'])
    assert table.shape == (10, 4)
    np.testing.assert_allclose(layer.apply(variables, ids), table[np.asarray(ids)], rtol=1e-6)
    q = normal((2, 4))
    np.testing.assert_allclose(
        layer.apply(variables, q, method=Embed.attend), np64(q) @ table.T, rtol=1e-5, atol=1e-5
    )


def test_embed_attend_without_call_and_dtype():
    layer = Embed(10, 4, dtype=jnp.bfloat16)
    variables = layer.init(KEY, jnp.ones((1, 4)), method=Embed.attend)
    assert variables['params']['embedding'].dtype == jnp.float32
    assert layer.apply(variables, jnp.array([1]))[0].dtype == jnp.bfloat16


def test_embed_init_scales_with_features():
    # variance_scaling(1, 'fan_in', 'normal', out_axis=0): the fan is the feature axis.
    table = Embed(2000, 64).init(KEY, jnp.array([0]))['params']['embedding']
    assert abs(float(jnp.std(table)) - 1 / 8) < 0.01


def test_embed_out_of_range_is_nan():
    layer = Embed(3, 2)
    variables = layer.init(KEY, jnp.array([0]))
    assert bool(jnp.all(jnp.isnan(layer.apply(variables, jnp.array([3])))))


def test_embed_errors():
    layer = Embed(3, 2)
    with pytest.raises(LayerInputDtypeError, match='Embed expected integer'):
        layer.init(KEY, jnp.ones((2,)))
    variables = layer.init(KEY, jnp.array([0]))
    with pytest.raises(LayerInputShapeError, match='attend\\(\\) query has shape \\(5,\\)'):
        layer.apply(variables, jnp.ones((5,)), method=Embed.attend)
