"""Normalization layers against plain jax.numpy computations of the same formulas."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core.errors import LinenError
from linen.layers import _norm_wrappers as norm_wrappers
from linen.layers import _normalization as norm
from linen.layers._normalization import (
    InvalidFeatureAxesError,
    InvalidGroupsError,
    InvalidMaskShapeError,
    MissingUseRunningAverageError,
    SpectralNormNonMatrixError,
)

KEY = jax.random.key(0)


def _normal(shape, seed=1, dtype=jnp.float32, loc=0.0, scale=1.0):
    return (jax.random.normal(jax.random.key(seed), shape) * scale + loc).astype(dtype)


def _close(actual, expected, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(
        np.asarray(actual, np.float64), np.asarray(expected, np.float64), rtol=rtol, atol=atol
    )


def _ref_norm(x, axes, eps, scale=None, bias=None, *, center=True, mask=None):
    """The textbook formula in float64 numpy, two-pass variance."""
    x = np.asarray(x, np.float64)
    where = True if mask is None else mask
    mean = np.mean(x, axis=axes, keepdims=True, where=where) if center else 0.0
    var = np.mean(np.square(x - mean), axis=axes, keepdims=True, where=where)
    y = (x - mean) / np.sqrt(var + eps)
    if scale is not None:
        y = y * np.asarray(scale, np.float64)
    if bias is not None:
        y = y + np.asarray(bias, np.float64)
    return y


def _random_affine():
    return {'scale_init': nn.initializers.normal(1.0), 'bias_init': nn.initializers.normal(1.0)}


# --------------------------------------------------------------------------- LayerNorm


@pytest.mark.parametrize('use_fast_variance', [True, False])
def test_layer_norm_matches_formula(use_fast_variance):
    x = _normal((3, 4, 6), loc=2.0, scale=3.0)
    layer = nn.LayerNorm(use_fast_variance=use_fast_variance, **_random_affine())
    variables = layer.init(KEY, x)
    params = variables['params']
    assert set(params) == {'scale', 'bias'}
    assert params['scale'].shape == (6,) and params['bias'].shape == (6,)
    y = layer.apply(variables, x)
    _close(y, _ref_norm(x, -1, 1e-6, params['scale'], params['bias']))


def test_layer_norm_axes():
    x = _normal((2, 3, 4, 5))
    layer = nn.LayerNorm(reduction_axes=(1, 2, 3), feature_axes=(1, -1), **_random_affine())
    variables = layer.init(KEY, x)
    scale, bias = variables['params']['scale'], variables['params']['bias']
    assert scale.shape == (3, 5)
    y = layer.apply(variables, x)
    expected = _ref_norm(x, (1, 2, 3), 1e-6, scale[:, None, :], bias[:, None, :])
    _close(y, expected)


def test_layer_norm_without_affine_has_no_params():
    x = _normal((2, 5))
    layer = nn.LayerNorm(use_bias=False, use_scale=False, epsilon=1e-3)
    variables = layer.init(KEY, x)
    assert not variables.get('params')
    _close(layer.apply(variables, x), _ref_norm(x, -1, 1e-3))


def test_fast_variance_is_one_pass_and_slow_is_robust():
    # A large mean makes E[x^2] - E[x]^2 cancel catastrophically in float32.
    x = _normal((4, 64), loc=1e3)
    ref = _ref_norm(x, -1, 1e-6)
    slow = nn.LayerNorm(use_fast_variance=False, use_scale=False, use_bias=False)
    _close(slow.apply({}, x), ref, rtol=1e-3, atol=1e-3)
    fast = nn.LayerNorm(use_scale=False, use_bias=False)
    assert np.max(np.abs(np.asarray(fast.apply({}, x)) - ref)) > 1e-2


@pytest.mark.parametrize('use_fast_variance', [True, False])
def test_layer_norm_mask(use_fast_variance):
    x = _normal((3, 8), loc=1.0)
    mask = jax.random.bernoulli(jax.random.key(7), 0.6, x.shape).at[:, 0].set(True)
    layer = nn.LayerNorm(use_fast_variance=use_fast_variance, use_scale=False, use_bias=False)
    y = layer.apply({}, x, mask=mask)
    _close(y, _ref_norm(x, -1, 1e-6, mask=np.asarray(mask)), rtol=1e-4, atol=1e-4)


def test_layer_norm_complex():
    x = _normal((2, 6)) + 1j * _normal((2, 6), seed=2)
    y = nn.LayerNorm(use_scale=False, use_bias=False).apply({}, x)
    xc = np.asarray(x, np.complex128)
    mean = xc.mean(-1, keepdims=True)
    var = np.mean(np.abs(xc - mean) ** 2, -1, keepdims=True)
    assert y.dtype == jnp.complex64
    np.testing.assert_allclose(np.asarray(y), (xc - mean) / np.sqrt(var + 1e-6), rtol=1e-4)


# --------------------------------------------------------------------------- dtypes


def test_dtype_and_param_dtype():
    x = _normal((2, 6))
    layer = nn.LayerNorm(param_dtype=jnp.bfloat16)
    variables = layer.init(KEY, x)
    assert variables['params']['scale'].dtype == jnp.bfloat16
    assert layer.apply(variables, x).dtype == jnp.float32  # promotion of f32 input, bf16 params
    layer16 = nn.LayerNorm(dtype=jnp.bfloat16)
    assert layer16.apply(layer16.init(KEY, x), x).dtype == jnp.bfloat16


def test_bfloat16_input_normalizes_with_float32_statistics():
    x = _normal((4, 32), loc=3.0, scale=2.0, dtype=jnp.bfloat16)
    layer = nn.LayerNorm()
    y = layer.apply(layer.init(KEY, x), x)
    # bf16 input, f32 params: the result is float32 and as exact as float32 math allows.
    assert y.dtype == jnp.float32
    _close(y, _ref_norm(np.asarray(x, np.float32), -1, 1e-6), rtol=1e-4, atol=1e-4)


def _statistics_dtypes(layer, x):
    """Dtypes the variance reaches ``rsqrt`` in: the precision of the statistics."""
    jaxpr = jax.make_jaxpr(lambda v: layer.apply({}, v))(x)
    return {str(eqn.invars[0].aval.dtype) for eqn in jaxpr.eqns if eqn.primitive.name == 'rsqrt'}


def test_force_float32_reductions():
    x = _normal((4, 32), dtype=jnp.bfloat16)
    forced = nn.LayerNorm(use_scale=False, use_bias=False, dtype=jnp.bfloat16)
    assert _statistics_dtypes(forced, x) == {'float32'}
    loose = nn.LayerNorm(
        use_scale=False, use_bias=False, dtype=jnp.bfloat16, force_float32_reductions=False
    )
    assert _statistics_dtypes(loose, x) == {'bfloat16'}
    # Statistics rounded to bfloat16 cost accuracy, visible against float32 statistics.
    ref = _ref_norm(np.asarray(x, np.float32), -1, 1e-6)
    err_forced = np.abs(np.asarray(forced.apply({}, x), np.float64) - ref).max()
    err_loose = np.abs(np.asarray(loose.apply({}, x), np.float64) - ref).max()
    assert err_forced <= err_loose


# --------------------------------------------------------------------------- RMSNorm


def test_rms_norm_matches_formula():
    x = _normal((3, 7), loc=1.5)
    layer = nn.RMSNorm(scale_init=nn.initializers.normal(1.0))
    variables = layer.init(KEY, x)
    assert set(variables['params']) == {'scale'}
    scale = np.asarray(variables['params']['scale'], np.float64)
    xd = np.asarray(x, np.float64)
    expected = xd / np.sqrt(np.mean(xd**2, -1, keepdims=True) + 1e-6) * scale
    _close(layer.apply(variables, x), expected)


def test_rms_norm_mask_and_axes():
    x = _normal((2, 3, 4))
    mask = jnp.arange(4) < 3
    layer = nn.RMSNorm(reduction_axes=(1, 2), feature_axes=1, use_scale=False)
    xd = np.asarray(x, np.float64)
    m = np.broadcast_to(np.asarray(mask), x.shape)
    expected = xd / np.sqrt(np.mean(xd**2, (1, 2), keepdims=True, where=m) + 1e-6)
    _close(layer.apply({}, x, mask=mask), expected)
    assert nn.RMSNorm(feature_axes=1).init(KEY, x)['params']['scale'].shape == (3,)


# --------------------------------------------------------------------------- BatchNorm


def test_batch_norm_train_updates_running_averages():
    x = _normal((8, 3, 5), loc=1.0, scale=2.0)
    layer = nn.BatchNorm(use_running_average=False, momentum=0.9, **_random_affine())
    variables = layer.init(KEY, x)
    assert set(variables) == {'params', 'batch_stats'}
    stats = variables['batch_stats']
    # init does not fold the init batch into the averages.
    np.testing.assert_array_equal(stats['mean'], np.zeros(5))
    np.testing.assert_array_equal(stats['var'], np.ones(5))
    assert stats['mean'].dtype == jnp.float32
    y, updates = layer.apply(variables, x, mutable=['batch_stats'])
    params = variables['params']
    _close(y, _ref_norm(x, (0, 1), 1e-5, params['scale'], params['bias']))
    xd = np.asarray(x, np.float64)
    _close(updates['batch_stats']['mean'], 0.1 * xd.mean((0, 1)))
    _close(updates['batch_stats']['var'], 0.9 + 0.1 * xd.var((0, 1)))


def test_batch_norm_eval_uses_running_averages():
    x = _normal((4, 5))
    stats = {'mean': _normal((5,), seed=3), 'var': jnp.abs(_normal((5,), seed=4)) + 0.5}
    layer = nn.BatchNorm(**_random_affine())
    variables = layer.init(KEY, x, use_running_average=True)
    variables = {'params': variables['params'], 'batch_stats': stats}
    y = layer.apply(variables, x, use_running_average=True)
    p = variables['params']
    expected = (np.asarray(x) - np.asarray(stats['mean'])) / np.sqrt(
        np.asarray(stats['var'], np.float64) + 1e-5
    ) * np.asarray(p['scale']) + np.asarray(p['bias'])
    _close(y, expected)


def test_batch_norm_axis_tuple_and_mask():
    x = _normal((6, 3, 4))
    mask = jax.random.bernoulli(jax.random.key(9), 0.7, x.shape).at[0].set(True)
    layer = nn.BatchNorm(use_running_average=False, axis=(1, 2), use_scale=False, use_bias=False)
    variables = layer.init(KEY, x)
    assert variables['batch_stats']['mean'].shape == (3, 4)
    y, _ = layer.apply(variables, x, mask=mask, mutable=['batch_stats'])
    _close(y, _ref_norm(x, 0, 1e-5, mask=np.asarray(mask)), rtol=1e-4, atol=1e-4)


def test_batch_norm_needs_use_running_average():
    x = _normal((4, 5))
    with pytest.raises(MissingUseRunningAverageError, match='use_running_average` is unset'):
        nn.BatchNorm().init(KEY, x)
    with pytest.raises(LinenError, match='use_running_average'):
        nn.BatchNorm(use_running_average=True).init(KEY, x, use_running_average=False)


def test_batch_norm_error_names_the_path():
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.BatchNorm()(nn.Dense(3)(x))

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Block()(x)

    with pytest.raises(MissingUseRunningAverageError, match=r'"/Block_0/BatchNorm_0"'):
        Outer().init(KEY, _normal((2, 4)))


def test_batch_norm_axis_name_with_jax_vmap():
    # Each vmapped slice sees 2 rows; pmean over 'batch' gives statistics of all 6.
    x = _normal((3, 2, 4), loc=1.0)
    layer = nn.BatchNorm(use_running_average=False, axis_name='batch', momentum=0.0)
    variables = layer.init(KEY, x[0])
    y, updates = jax.vmap(
        lambda xs: layer.apply(variables, xs, mutable=['batch_stats']),
        axis_name='batch',
    )(x)
    xd = np.asarray(x, np.float64).reshape(6, 4)
    _close(y.reshape(6, 4), _ref_norm(xd, 0, 1e-5))
    _close(updates['batch_stats']['mean'], np.broadcast_to(xd.mean(0), (3, 4)))


# (layer, per-device input reshaped for the statistics, reduction axes, subtract the mean)
_CROSS_DEVICE = {
    'LayerNorm': (lambda: nn.LayerNorm(axis_name='d'), lambda x: x, (-1,), True),
    'RMSNorm': (lambda: nn.RMSNorm(axis_name='d'), lambda x: x, (-1,), False),
    'InstanceNorm': (lambda: nn.InstanceNorm(axis_name='d'), lambda x: x, (1,), True),
    'GroupNorm': (
        lambda: nn.GroupNorm(num_groups=2, axis_name='d'),
        lambda x: x.reshape(*x.shape[:-1], 2, 2),
        (1, 3),
        True,
    ),
}


@pytest.mark.parametrize('name', sorted(_CROSS_DEVICE))
def test_axis_name_averages_statistics_across_the_mapped_axis(name):
    make, grouped, axes, center = _CROSS_DEVICE[name]
    x = _normal((2, 1, 4, 4), loc=1.0)  # two "devices", each with a (1, 4, 4) input
    module = make()
    variables = jax.vmap(lambda xs: module.init(KEY, xs), axis_name='d')(x)
    y = jax.vmap(lambda v, xs: module.apply(v, xs), axis_name='d')(variables, x)
    # Cross-device statistics: the average over devices of each device's moments.
    xd = np.stack([grouped(np.asarray(xi, np.float64)) for xi in x])
    device_axes = tuple(a + 1 if a >= 0 else a for a in axes)
    mu = xd.mean(device_axes, keepdims=True).mean(0) if center else 0.0
    ms = (xd**2).mean(device_axes, keepdims=True).mean(0)
    expected = ((xd - mu) / np.sqrt(ms - mu**2 + 1e-6)).reshape(x.shape)
    _close(y, expected, rtol=1e-4, atol=1e-4)


def test_batch_norm_axis_name_with_nn_vmap():
    x = _normal((3, 2, 4), loc=1.0)

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            bn = nn.vmap(
                nn.BatchNorm,
                # The pmean-ed statistics are equal in every slice, but vmap still
                # sees them as mapped, so they carry the axis (Flax behaves the same).
                variable_axes={'params': None, 'batch_stats': 0},
                split_rngs={'params': False},
                axis_name='batch',
            )(use_running_average=False, momentum=0.0, axis_name='batch')
            return bn(x)

    variables = Model().init(KEY, x)
    assert variables['batch_stats']['VmapBatchNorm_0']['mean'].shape == (3, 4)
    y, updates = Model().apply(variables, x, mutable=['batch_stats'])
    xd = np.asarray(x, np.float64).reshape(6, 4)
    _close(y.reshape(6, 4), _ref_norm(xd, 0, 1e-5))
    _close(updates['batch_stats']['VmapBatchNorm_0']['mean'], np.broadcast_to(xd.mean(0), (3, 4)))


def test_axis_index_groups_under_pmap():
    # vmap collectives reject axis_index_groups; pmap over 4 fake CPU devices accepts them.
    script = textwrap.dedent(
        """
        import jax, jax.numpy as jnp, numpy as np
        import linen.nn as nn
        x = jax.random.normal(jax.random.key(1), (4, 3, 2))
        bn = nn.BatchNorm(use_running_average=False, axis_name='d',
                          axis_index_groups=[[0, 1], [2, 3]], use_scale=False, use_bias=False)
        v = bn.init(jax.random.key(0), x[0])
        y, _ = jax.pmap(lambda xs: bn.apply(v, xs, mutable=['batch_stats']), axis_name='d')(x)
        for group in ([0, 1], [2, 3]):
            xs = np.asarray(x[np.array(group)], np.float64).reshape(-1, 2)
            ref = (xs - xs.mean(0)) / np.sqrt(xs.var(0) + 1e-5)
            np.testing.assert_allclose(np.asarray(y[np.array(group)]).reshape(-1, 2), ref,
                                       rtol=1e-4, atol=1e-4)
        print('OK')
        """
    )
    env = {**os.environ, 'XLA_FLAGS': '--xla_force_host_platform_device_count=4'}
    env['JAX_PLATFORMS'] = 'cpu'
    done = subprocess.run(
        [sys.executable, '-c', script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and 'OK' in done.stdout, done.stderr[-3000:]


# --------------------------------------------------------------------------- GroupNorm


def _ref_group_norm(x, num_groups, eps=1e-6, scale=None, bias=None):
    xd = np.asarray(x, np.float64)
    grouped = xd.reshape(*xd.shape[:-1], num_groups, -1)
    axes = (*range(1, xd.ndim - 1), xd.ndim)
    y = _ref_norm(grouped, axes, eps).reshape(xd.shape)
    return y * np.asarray(scale) + np.asarray(bias)


@pytest.mark.parametrize(
    'kwargs,groups',
    [({'num_groups': 3}, 3), ({'num_groups': None, 'group_size': 2}, 3), ({'num_groups': 6}, 6)],
)
def test_group_norm_matches_formula(kwargs, groups):
    x = _normal((2, 4, 5, 6), loc=1.0)
    layer = nn.GroupNorm(**kwargs, **_random_affine())
    variables = layer.init(KEY, x)
    p = variables['params']
    assert p['scale'].shape == (6,) and p['bias'].shape == (6,)
    _close(layer.apply(variables, x), _ref_group_norm(x, groups, scale=p['scale'], bias=p['bias']))


def test_group_norm_reduction_axes_and_mask():
    x = _normal((2, 3, 4))
    mask = jnp.arange(4) != 1
    layer = nn.GroupNorm(num_groups=2, reduction_axes=(-1,), use_scale=False, use_bias=False)
    y = layer.apply({}, x, mask=mask)
    xd = np.asarray(x, np.float64).reshape(2, 3, 2, 2)
    m = np.broadcast_to(np.asarray(mask).reshape(2, 2), xd.shape)
    _close(y, _ref_norm(xd, -1, 1e-6, mask=m).reshape(2, 3, 4), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    'kwargs,match',
    [
        ({'num_groups': 4}, r'num_groups=4 does not divide the 6 channels'),
        ({'num_groups': 0}, r'num_groups=0 does not divide'),
        ({'num_groups': None, 'group_size': 4}, r'group_size=4 does not divide the 6 channels'),
        ({'num_groups': 2, 'group_size': 3}, r'exactly one must be given'),
        ({'num_groups': None}, r'exactly one must be given'),
    ],
)
def test_group_norm_bad_groups(kwargs, match):
    with pytest.raises(InvalidGroupsError, match=match):
        nn.GroupNorm(**kwargs).init(KEY, _normal((2, 6)))


def test_group_norm_error_names_path_and_reduction_axes_must_include_last():
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.GroupNorm(num_groups=4, name='norm')(x)

    with pytest.raises(InvalidGroupsError, match=r'GroupNorm at "/norm"'):
        Net().init(KEY, _normal((2, 6)))
    with pytest.raises(InvalidFeatureAxesError, match='must include the last axis'):
        nn.GroupNorm(num_groups=2, reduction_axes=(1,)).init(KEY, _normal((2, 3, 4)))


# --------------------------------------------------------------------------- InstanceNorm


def test_instance_norm_matches_formula():
    x = _normal((2, 5, 4, 3), loc=-1.0)
    layer = nn.InstanceNorm(**_random_affine())
    variables = layer.init(KEY, x)
    p = variables['params']
    assert p['scale'].shape == (3,)
    _close(layer.apply(variables, x), _ref_norm(x, (1, 2), 1e-6, p['scale'], p['bias']))


def test_instance_norm_feature_axes():
    x = _normal((2, 3, 4, 5))
    layer = nn.InstanceNorm(feature_axes=(1, 3), use_scale=False, use_bias=False)
    _close(layer.apply({}, x), _ref_norm(x, (2,), 1e-6))
    with pytest.raises(InvalidFeatureAxesError, match='Axis 0 is the batch axis'):
        nn.InstanceNorm().init(KEY, _normal((6,)))


# --------------------------------------------------------------------------- input errors


@pytest.mark.parametrize(
    'layer',
    [
        nn.LayerNorm(feature_axes=3),
        nn.LayerNorm(reduction_axes=-4),
        nn.RMSNorm(reduction_axes=2),
        nn.InstanceNorm(feature_axes=5),
        nn.BatchNorm(use_running_average=False, axis=2),
    ],
    ids=['LayerNorm-feature', 'LayerNorm-reduction', 'RMSNorm', 'InstanceNorm', 'BatchNorm'],
)
def test_out_of_range_axes(layer):
    with pytest.raises(InvalidFeatureAxesError, match=r'do not fit an input of shape \(2, 4\)'):
        layer.init(KEY, _normal((2, 4)))


@pytest.mark.parametrize(
    'layer,kwargs',
    [
        (nn.LayerNorm(), {}),
        (nn.RMSNorm(), {}),
        (nn.GroupNorm(num_groups=2), {}),
        (nn.InstanceNorm(), {}),
        (nn.BatchNorm(use_running_average=False), {'mutable': ['batch_stats']}),
    ],
    ids=['LayerNorm', 'RMSNorm', 'GroupNorm', 'InstanceNorm', 'BatchNorm'],
)
def test_mask_of_wrong_shape(layer, kwargs):
    x = _normal((2, 3, 4))
    variables = layer.init(KEY, x)
    with pytest.raises(InvalidMaskShapeError, match=r'mask of shape \(2, 3\) does not broadcast'):
        layer.apply(variables, x, mask=jnp.ones((2, 3), bool), **kwargs)


def test_wrong_feature_count_at_apply():
    layer = nn.LayerNorm()
    variables = layer.init(KEY, _normal((2, 4)))
    with pytest.raises(ValueError, match='scale'):
        layer.apply(variables, _normal((2, 5)))


# --------------------------------------------------------------------------- wrappers


class Affine(nn.Module):
    """A minimal layer with a matrix and a vector parameter, independent of Dense."""

    features: int = 3
    kernel_shape: tuple = ()

    @nn.compact
    def __call__(self, x):
        shape = self.kernel_shape or (x.shape[-1], self.features)
        kernel = self.param('kernel', nn.initializers.lecun_normal(), shape)
        bias = self.param('bias', nn.initializers.normal(1.0), (self.features,))
        y = x @ kernel.reshape(-1, self.features)
        return y + bias.reshape((1,) * (y.ndim - 1) + bias.shape)


def _ref_power_iteration(w, u, n_steps, eps=1e-12):
    w = np.asarray(w, np.float64).reshape(-1, w.shape[-1])
    u = np.asarray(u, np.float64)
    for _ in range(n_steps):
        v = u @ w.T
        v = v / np.sqrt(np.sum(v * v) + eps)
        u = v @ w
        u = u / np.sqrt(np.sum(u * u) + eps)
    return u, float((v @ w @ u.T)[0, 0])


@pytest.mark.parametrize('n_steps', [1, 3])
def test_spectral_norm(n_steps):
    x = _normal((2, 4))
    layer = nn.SpectralNorm(Affine(), n_steps=n_steps)
    variables = layer.init(KEY, x, update_stats=False)
    stats = variables['batch_stats']
    assert set(stats) == {'layer_instance/kernel/u', 'layer_instance/kernel/sigma'}
    assert stats['layer_instance/kernel/u'].shape == (1, 3)
    params = variables['params']['layer_instance']
    assert set(params) == {'kernel', 'bias'}
    w = np.asarray(params['kernel'], np.float64)

    y, updates = layer.apply(variables, x, update_stats=True, mutable=['batch_stats'])
    u, sigma = _ref_power_iteration(w, stats['layer_instance/kernel/u'], n_steps)
    _close(y, np.asarray(x, np.float64) @ (w / sigma) + np.asarray(params['bias']), 1e-4, 1e-4)
    new = updates['batch_stats']
    _close(new['layer_instance/kernel/u'], u, 1e-4, 1e-5)
    _close(new['layer_instance/kernel/sigma'], sigma, 1e-5)

    # Without update_stats the state stays and nothing needs to be mutable.
    y_eval = layer.apply(variables, x, update_stats=False)
    _close(y_eval, y, 1e-5, 1e-5)


def test_spectral_norm_reshapes_higher_rank_kernels():
    x = _normal((2, 12))
    layer = nn.SpectralNorm(Affine(kernel_shape=(3, 4, 3)))
    variables = layer.init(KEY, x, update_stats=True)
    assert variables['batch_stats']['layer_instance/kernel/u'].shape == (1, 3)
    with pytest.raises(SpectralNormNonMatrixError, match=r'"layer_instance/kernel" has shape'):
        nn.SpectralNorm(Affine(kernel_shape=(3, 4, 3)), error_on_non_matrix=True).init(
            KEY, x, update_stats=True
        )


@pytest.mark.parametrize('feature_axes', [-1, None])
def test_weight_norm(feature_axes):
    x = _normal((2, 4))
    layer = nn.WeightNorm(
        Affine(), feature_axes=feature_axes, scale_init=nn.initializers.normal(1.0)
    )
    variables = layer.init(KEY, x)
    params = variables['params']
    scale = params['layer_instance/kernel/scale']
    assert scale.shape == ((3,) if feature_axes == -1 else ())
    assert 'layer_instance/bias/scale' not in params  # the default filter keeps only kernels
    w = np.asarray(params['layer_instance']['kernel'], np.float64)
    axes = 0 if feature_axes == -1 else None
    w_bar = w / np.sqrt(np.sum(w * w, axis=axes, keepdims=True) + 1e-12) * np.asarray(scale)
    expected = np.asarray(x, np.float64) @ w_bar + np.asarray(params['layer_instance']['bias'])
    _close(layer.apply(variables, x), expected, 1e-5, 1e-5)


def test_error_classes_are_linen_errors():
    for cls in (
        InvalidFeatureAxesError,
        InvalidGroupsError,
        InvalidMaskShapeError,
        MissingUseRunningAverageError,
        SpectralNormNonMatrixError,
    ):
        assert issubclass(cls, LinenError) and issubclass(cls, ValueError)
    assert set(norm.__all__) >= {'LayerNorm', 'BatchNorm'}
    assert set(norm_wrappers.__all__) >= {'SpectralNorm', 'WeightNorm'}
