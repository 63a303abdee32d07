"""Flax as an oracle for the normalization layers.

For every row, ``linen.nn`` and ``flax.linen`` build the same layer with the same
arguments; the same PRNG key must give the same variable tree (collections, paths,
shapes, values) and the same outputs and updated statistics. The statistics are
computed in the same order, so most rows agree bit for bit.
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


def _normal(shape, seed=1, dtype=jnp.float32, loc=1.0, scale=2.0):
    return (jax.random.normal(jax.random.key(seed), shape) * scale + loc).astype(dtype)


def _mask(shape, seed=3):
    return jax.random.bernoulli(jax.random.key(seed), 0.7, shape)


class Row:
    def __init__(self, name, make, inputs, *, kwargs=None, mutable=False, init_kwargs=None):
        self.name, self.make, self.inputs = name, make, inputs
        self.kwargs, self.mutable = kwargs or {}, mutable
        self.init_kwargs = self.kwargs if init_kwargs is None else init_kwargs


def _random_affine(nn):
    return {'scale_init': nn.initializers.normal(1.0), 'bias_init': nn.initializers.normal(1.0)}


X4 = lambda: _normal((2, 3, 4, 6))
BATCH_STATS = ['batch_stats']

ROWS = [
    Row('LayerNorm', lambda nn: nn.LayerNorm(), X4),
    Row('LayerNorm_affine', lambda nn: nn.LayerNorm(**_random_affine(nn)), X4),
    Row(
        'LayerNorm_axes',
        lambda nn: nn.LayerNorm(reduction_axes=(1, 2, 3), feature_axes=(-2, -1)),
        X4,
    ),
    Row('LayerNorm_slow_var', lambda nn: nn.LayerNorm(use_fast_variance=False), X4),
    Row('LayerNorm_mask', lambda nn: nn.LayerNorm(), X4, kwargs={'mask': _mask((2, 3, 4, 6))}),
    Row(
        'LayerNorm_bf16_in', lambda nn: nn.LayerNorm(), lambda: _normal((3, 8), dtype=jnp.bfloat16)
    ),
    Row(
        'LayerNorm_bf16',
        lambda nn: nn.LayerNorm(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16),
        lambda: _normal((3, 8), dtype=jnp.bfloat16),
    ),
    Row(
        'LayerNorm_no_f32',
        lambda nn: nn.LayerNorm(force_float32_reductions=False),
        lambda: _normal((3, 8), dtype=jnp.bfloat16),
    ),
    Row('RMSNorm', lambda nn: nn.RMSNorm(scale_init=nn.initializers.normal(1.0)), X4),
    Row('RMSNorm_mask', lambda nn: nn.RMSNorm(), X4, kwargs={'mask': _mask((2, 3, 4, 6))}),
    Row(
        'BatchNorm_train',
        lambda nn: nn.BatchNorm(use_running_average=False, momentum=0.9, **_random_affine(nn)),
        X4,
        mutable=BATCH_STATS,
    ),
    Row(
        'BatchNorm_axis',
        lambda nn: nn.BatchNorm(use_running_average=False, axis=(1, 3), use_fast_variance=False),
        X4,
        mutable=BATCH_STATS,
    ),
    Row(
        'BatchNorm_mask',
        lambda nn: nn.BatchNorm(use_running_average=False),
        X4,
        kwargs={'mask': _mask((2, 3, 4, 6))},
        mutable=BATCH_STATS,
    ),
    Row('BatchNorm_eval', lambda nn: nn.BatchNorm(use_running_average=True), X4),
    Row(
        'BatchNorm_call_arg',
        lambda nn: nn.BatchNorm(),
        X4,
        kwargs={'use_running_average': False},
        mutable=BATCH_STATS,
    ),
    Row('GroupNorm', lambda nn: nn.GroupNorm(num_groups=3, **_random_affine(nn)), X4),
    Row('GroupNorm_size', lambda nn: nn.GroupNorm(num_groups=None, group_size=2), X4),
    Row('GroupNorm_axes', lambda nn: nn.GroupNorm(num_groups=2, reduction_axes=(2, -1)), X4),
    Row(
        'GroupNorm_mask',
        lambda nn: nn.GroupNorm(num_groups=2),
        X4,
        kwargs={'mask': _mask((2, 3, 4, 6))},
    ),
    Row('InstanceNorm', lambda nn: nn.InstanceNorm(**_random_affine(nn)), X4),
    Row('InstanceNorm_axes', lambda nn: nn.InstanceNorm(feature_axes=(1, -1)), X4),
]


def _assert_same(ours, theirs, what):
    ours_flat = dict(jax.tree_util.tree_flatten_with_path(ours)[0])
    theirs_flat = dict(jax.tree_util.tree_flatten_with_path(theirs)[0])
    assert sorted(map(jax.tree_util.keystr, ours_flat)) == sorted(
        map(jax.tree_util.keystr, theirs_flat)
    ), what
    for path, leaf in theirs_flat.items():
        mine = ours_flat[path]
        assert mine.shape == leaf.shape and mine.dtype == leaf.dtype, (what, path)
        np.testing.assert_array_equal(
            np.asarray(mine, np.float64), np.asarray(leaf, np.float64), err_msg=f'{what} {path}'
        )


@pytest.mark.parametrize('row', ROWS, ids=lambda r: r.name)
def test_same_variables_and_outputs_as_flax(row):
    x = row.inputs()
    ours, theirs = row.make(linen_nn), row.make(flax_nn)
    v_ours = ours.init(KEY, x, **row.init_kwargs)
    v_theirs = theirs.init(KEY, x, **row.init_kwargs)
    _assert_same(dict(v_ours), dict(v_theirs), 'init')
    out_ours = ours.apply(v_theirs, x, mutable=row.mutable, **row.kwargs)
    out_theirs = theirs.apply(v_theirs, x, mutable=row.mutable, **row.kwargs)
    if row.mutable:
        _assert_same(dict(out_ours[1]), dict(out_theirs[1]), 'updated state')
        out_ours, out_theirs = out_ours[0], out_theirs[0]
    _assert_same(out_ours, out_theirs, 'output')


@pytest.mark.parametrize(
    'name,kwargs',
    [
        ('BatchNorm', {'use_running_average': False}),
        ('LayerNorm', {}),
        ('RMSNorm', {}),
        ('GroupNorm', {'num_groups': 3}),
        ('InstanceNorm', {}),
    ],
)
def test_cross_device_statistics_match_flax(name, kwargs):
    x = _normal((3, 2, 4, 6))
    ours = getattr(linen_nn, name)(axis_name='batch', **kwargs)
    theirs = getattr(flax_nn, name)(axis_name='batch', **kwargs)

    def run(layer):
        variables = jax.vmap(lambda xs: layer.init(KEY, xs), axis_name='batch')(x)
        return jax.vmap(
            lambda v, xs: layer.apply(v, xs, mutable=['batch_stats']), axis_name='batch'
        )(variables, x)

    _assert_same(jax.tree_util.tree_map(jnp.asarray, run(ours)), run(theirs), name)


# --------------------------------------------------------------------------- wrappers


WRAPPER_ROWS = [
    Row('SpectralNorm_dense', lambda nn: nn.SpectralNorm(nn.Dense(5)), lambda: _normal((2, 6)),
        kwargs={'update_stats': True}, mutable=BATCH_STATS),
    Row('SpectralNorm_conv_3steps', lambda nn: nn.SpectralNorm(nn.Conv(5, (3, 3)), n_steps=3),
        X4, kwargs={'update_stats': True}, mutable=BATCH_STATS),
    Row('SpectralNorm_eval', lambda nn: nn.SpectralNorm(nn.Dense(5)), lambda: _normal((2, 6)),
        kwargs={'update_stats': False}),
    Row('WeightNorm_dense', lambda nn: nn.WeightNorm(nn.Dense(5)), lambda: _normal((2, 6))),
    Row('WeightNorm_conv_all', lambda nn: nn.WeightNorm(
        nn.Conv(5, (3, 3)), variable_filter={'kernel', 'bias'}, feature_axes=None), X4),
]  # fmt: skip


@pytest.mark.parametrize('row', WRAPPER_ROWS, ids=lambda r: r.name)
def test_wrappers_same_as_flax(row):
    test_same_variables_and_outputs_as_flax(row)


@pytest.mark.parametrize('row', WRAPPER_ROWS, ids=lambda r: r.name)
def test_wrappers_apply_same_as_flax(row):
    # Flax's variables, both libraries' apply: independent of how init stores params.
    x = row.inputs()
    ours, theirs = row.make(linen_nn), row.make(flax_nn)
    variables = theirs.init(KEY, x, **row.init_kwargs)
    out_ours = ours.apply(variables, x, mutable=row.mutable, **row.kwargs)
    out_theirs = theirs.apply(variables, x, mutable=row.mutable, **row.kwargs)
    if row.mutable:
        _assert_same(dict(out_ours[1]), dict(out_theirs[1]), 'updated state')
        out_ours, out_theirs = out_ours[0], out_theirs[0]
    _assert_same(out_ours, out_theirs, 'output')


def _wrapped_layer(nn, stateful):
    """A layer that sows and, ``stateful``, counts its calls and keeps batch statistics."""

    class Layer(nn.Module):
        @nn.compact
        def __call__(self, x):
            self.sow('intermediates', 'seen', x)
            if not stateful:
                return nn.Dense(5)(x)
            count = self.variable('state', 'count', lambda: jnp.zeros((), jnp.int32))
            if not self.is_initializing():
                count.value += 1
            return nn.Dense(5)(nn.BatchNorm(use_running_average=False)(x))

    return Layer()


def _outcome(run):
    try:
        return 'ok', run()
    except Exception as error:  # the outcome compared: Flax's class and message head
        return 'raised', error


@pytest.mark.parametrize(
    'wrapper,mutable',
    [
        ('WeightNorm', ['intermediates']),
        ('WeightNorm', ['batch_stats', 'state']),
        ('WeightNorm', True),
        ('SpectralNorm', ['intermediates']),
        ('SpectralNorm', ['batch_stats', 'state', 'intermediates']),
        ('SpectralNorm', True),
    ],
)
@pytest.mark.parametrize('capture', [False, True])
@pytest.mark.parametrize('stateful', [False, True])
def test_what_a_wrapped_layer_may_change_in_apply_is_flaxs(wrapper, mutable, capture, stateful):
    """``WeightNorm`` lets its layer change nothing in apply (sows and captured
    intermediates dropped, a state update refused, whatever ``mutable=`` says);
    ``SpectralNorm`` lets it change what ``apply`` makes mutable: as in Flax."""
    x = _normal((2, 6))
    kwargs = {'update_stats': True} if wrapper == 'SpectralNorm' else {}

    def make(nn):
        return getattr(nn, wrapper)(_wrapped_layer(nn, stateful))

    variables = make(flax_nn).init(KEY, x, **kwargs)
    _assert_same(dict(make(linen_nn).init(KEY, x, **kwargs)), dict(variables), 'init')

    def apply(nn):
        return make(nn).apply(
            variables, x, mutable=mutable, capture_intermediates=capture, **kwargs
        )

    kind, ours = _outcome(lambda: apply(linen_nn))
    expected_kind, theirs = _outcome(lambda: apply(flax_nn))
    assert kind == expected_kind, (ours, theirs)
    if kind == 'raised':
        assert type(ours).__name__ == type(theirs).__name__
        assert str(ours).startswith(str(theirs).split(' in "')[0])
        return
    _assert_same(ours[0], theirs[0], 'output')
    _assert_same(dict(ours[1]), dict(theirs[1]), 'updated variables')


@pytest.mark.parametrize('update_stats', [False, True])
def test_spectral_norm_called_twice_while_capturing_runs_with_flaxs_values(update_stats):
    """Flax fails here (fuzz D7: its mapping meets the first call's captured tuple);
    linen gives Flax's output of the same model without capturing, and captures each
    call's output."""

    def twice(nn, calls=2):
        class Twice(nn.Module):
            @nn.compact
            def __call__(self, x):
                norm = nn.SpectralNorm(nn.Dense(6))
                for _ in range(calls):
                    x = norm(x, update_stats=update_stats)
                return x

        return Twice()

    x = _normal((2, 6))
    variables = twice(flax_nn).init(KEY, x)
    stats = ['batch_stats'] if update_stats else []
    expected, _ = twice(flax_nn).apply(variables, x, mutable=stats)
    first, _ = twice(flax_nn, calls=1).apply(variables, x, mutable=stats)
    out, state = twice(linen_nn).apply(
        variables, x, capture_intermediates=True, mutable=['intermediates', *stats]
    )
    _assert_same(out, expected, 'output')
    _assert_same(state['intermediates']['SpectralNorm_0']['__call__'], (first, out), 'captured')
