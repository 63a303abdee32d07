"""Lifted vmap: per-collection axes, rng splitting, in/out axes, axis names, metadata, errors."""

from __future__ import annotations

import functools
import re
from collections import Counter as Multiset

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import errors
from linen.transforms.errors import TransformAxisSizeError, VmapVariableAxisError


def normal_init(key, shape):
    return jax.random.normal(key, shape)


class Dense(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        w = self.param('w', normal_init, (x.shape[-1], self.features))
        b = self.param('b', normal_init, (self.features,))
        return x @ w + b


class Noise(nn.Module):
    """Adds uniform noise drawn from the 'dropout' stream (a dropout stand-in)."""

    @nn.compact
    def __call__(self, x):
        return x + jax.random.uniform(self.make_rng('dropout'), x.shape)


class RunningMean(nn.Module):
    """A batch-stats stand-in: keeps the mean of what it saw, sows its input."""

    @nn.compact
    def __call__(self, x):
        mean = self.variable('batch_stats', 'mean', jnp.zeros, x.shape[-1:])
        count = self.variable('batch_stats', 'count', lambda: jnp.zeros((), jnp.int32))
        out = x - mean.value.reshape((1,) * (x.ndim - 1) + mean.value.shape)
        if not self.is_initializing():
            mean.value = 0.5 * mean.value + 0.5 * x.mean(0)
            count.value = count.value + 1
        self.sow('intermediates', 'seen', x)
        return out


def stacked_dense(features=2, split=True, **kw):
    return nn.vmap(Dense, variable_axes={'params': 0}, split_rngs={'params': split}, **kw)(features)


# ---------------------------------------------------------------- variable axes


def test_variable_axes_0_stacks_one_parameter_set_per_slice():
    x = jax.random.normal(jax.random.key(1), (3, 4))
    model = stacked_dense()
    variables = model.init(jax.random.key(0), x)
    w, b = variables['params']['w'], variables['params']['b']
    assert w.shape == (3, 4, 2) and b.shape == (3, 2)
    y = model.apply(variables, x)
    expected = jnp.stack([x[i] @ w[i] + b[i] for i in range(3)])
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_variable_axes_none_shares_parameters_across_the_batch():
    x = jax.random.normal(jax.random.key(1), (3, 4))
    model = nn.vmap(Dense, variable_axes={'params': None}, split_rngs={'params': False})(2)
    variables = model.init(jax.random.key(0), x)
    assert jax.tree_util.tree_map(jnp.shape, variables['params']) == {'w': (4, 2), 'b': (2,)}
    # The shared set is what the untransformed module makes with the same key.
    plain = Dense(2).init(jax.random.key(0), x[0])
    np.testing.assert_array_equal(variables['params']['w'], plain['params']['w'])
    p = variables['params']
    np.testing.assert_allclose(model.apply(variables, x), x @ p['w'] + p['b'][None], rtol=1e-6)


@pytest.mark.parametrize('split', [True, False])
def test_split_rngs_decides_whether_slices_get_different_params(split):
    variables = stacked_dense(split=split).init(jax.random.key(0), jnp.ones((3, 4)))
    w = variables['params']['w']
    same = [bool(jnp.array_equal(w[0], w[i])) for i in (1, 2)]
    assert same == ([False, False] if split else [True, True])
    if not split:
        # Unsplit: every slice sees the key the untransformed module would.
        plain = Dense(2).init(jax.random.key(0), jnp.ones((4,)))
        np.testing.assert_array_equal(w[0], plain['params']['w'])


@pytest.mark.parametrize('split', [True, False])
def test_split_rngs_for_a_dropout_stream(split):
    model = nn.vmap(Noise, variable_axes={}, split_rngs={'dropout': split})()
    x = jnp.zeros((4, 5))
    y = model.apply({}, x, rngs={'dropout': jax.random.key(3)})
    rows_equal = [bool(jnp.array_equal(y[0], y[i])) for i in range(1, 4)]
    assert rows_equal == [not split] * 3
    if not split:
        plain = Noise().apply({}, x[0], rngs={'dropout': jax.random.key(3)})
        np.testing.assert_array_equal(y[0], plain)


def test_gradients_equal_the_per_slice_computation():
    x = jax.random.normal(jax.random.key(1), (3, 4))
    model = stacked_dense()
    params = model.init(jax.random.key(0), x)['params']

    def loss(p):
        return jnp.sum(model.apply({'params': p}, x) ** 2)

    def loss_ref(p):
        ys = [x[i] @ p['w'][i] + p['b'][i] for i in range(3)]
        return sum(jnp.sum(y**2) for y in ys)

    g, g_ref = jax.grad(loss)(params), jax.grad(loss_ref)(params)
    for k in ('w', 'b'):
        np.testing.assert_allclose(g[k], g_ref[k], rtol=1e-5)


# --------------------------------------------------------------- in/out axes, size


class Affine(nn.Module):
    @nn.compact
    def __call__(self, x, scale):
        w = self.param('w', normal_init, (x.shape[-1],))
        return x * w * scale


def test_in_axes_tuple_with_none_broadcasts_that_argument():
    x = jax.random.normal(jax.random.key(1), (3, 4))
    scale = jnp.arange(4.0)
    model = nn.vmap(
        Affine, variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=(0, None)
    )()
    variables = model.init(jax.random.key(0), x, scale)
    w = variables['params']['w']
    assert w.shape == (3, 4)
    np.testing.assert_allclose(model.apply(variables, x, scale), x * w * scale[None], rtol=1e-6)


def test_in_axes_1_and_out_axes_1():
    x = jax.random.normal(jax.random.key(1), (4, 3))  # mapped axis is 1
    model = stacked_dense(in_axes=1, out_axes=1)
    variables = model.init(jax.random.key(0), x)
    p = variables['params']
    y = model.apply(variables, x)
    assert y.shape == (2, 3)
    expected = jnp.stack([x[:, i] @ p['w'][i] + p['b'][i] for i in range(3)], axis=1)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_negative_in_and_out_axes():
    x = jax.random.normal(jax.random.key(1), (4, 3))
    model = stacked_dense(in_axes=-1, out_axes=-1)
    variables = model.init(jax.random.key(0), x)
    p = variables['params']
    y = model.apply(variables, x)
    expected = jnp.stack([x[:, i] @ p['w'][i] + p['b'][i] for i in range(3)], axis=-1)
    assert y.shape == (2, 3)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_axis_size_when_no_argument_is_mapped():
    model = stacked_dense(in_axes=None, axis_size=5)
    x = jnp.ones((4,))
    variables = model.init(jax.random.key(0), x)
    p = variables['params']
    assert p['w'].shape == (5, 4, 2)
    np.testing.assert_allclose(model.apply(variables, x), x @ p['w'] + p['b'], rtol=1e-6)


def test_axis_name_reaches_collectives_inside():
    class Center(nn.Module):
        @nn.compact
        def __call__(self, x):
            return x - jax.lax.pmean(x, 'batch')

    model = nn.vmap(Center, variable_axes={}, split_rngs={}, axis_name='batch')()
    x = jax.random.normal(jax.random.key(1), (5, 3))
    np.testing.assert_allclose(
        model.apply({}, x), x - x.mean(0, keepdims=True), rtol=1e-5, atol=1e-6
    )


# ----------------------------------------------------------------- collections


def test_mutable_collections_mapped_per_slice():
    model = nn.vmap(
        RunningMean,
        variable_axes={'batch_stats': 0, 'intermediates': 0},
        split_rngs={},
        in_axes=1,
        out_axes=1,
    )()
    x = jax.random.normal(jax.random.key(1), (6, 3, 2))  # 3 slices of (6, 2)
    variables = model.init(jax.random.key(0), x)
    assert variables['batch_stats']['mean'].shape == (3, 2)
    y, updates = model.apply(variables, x, mutable=['batch_stats', 'intermediates'])
    np.testing.assert_allclose(y, x, rtol=1e-6)  # the mean was zero before the update
    expected_mean = 0.5 * x.mean(0)  # (3, 2): mean over the 6 rows of each slice
    np.testing.assert_allclose(updates['batch_stats']['mean'], expected_mean, rtol=1e-5)
    np.testing.assert_array_equal(updates['batch_stats']['count'], [1, 1, 1])
    (seen,) = updates['intermediates']['seen']
    np.testing.assert_array_equal(seen, jnp.moveaxis(x, 1, 0))
    # A second step sees the first step's state.
    y2, _ = model.apply({**variables, **updates}, x, mutable=['batch_stats'])
    np.testing.assert_allclose(y2, x - expected_mean[None], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(_['batch_stats']['count'], [2, 2, 2])


def test_broadcast_mutable_counter_is_shared():
    class Counter(nn.Module):
        @nn.compact
        def __call__(self, x):
            c = self.variable('counter', 'n', lambda: jnp.zeros((), jnp.int32))
            c.value = c.value + 1
            return x

    model = nn.vmap(Counter, variable_axes={'counter': None}, split_rngs={})()
    variables = model.init(jax.random.key(0), jnp.ones((3, 2)))
    assert variables['counter']['n'].shape == ()
    _, upd = model.apply(variables, jnp.ones((3, 2)), mutable='counter')
    assert int(upd['counter']['n']) == 2


# ---------------------------------------------------------------- metadata


def test_metadata_params_add_the_axis_name_to_partitioned_boxes():
    class PDense(nn.Module):
        @nn.compact
        def __call__(self, x):
            init = nn.with_partitioning(normal_init, (None, 'model'))
            w = self.param('w', init, (x.shape[-1], 2))
            return x @ w

    model = nn.vmap(
        PDense,
        variable_axes={'params': 0},
        split_rngs={'params': True},
        metadata_params={nn.PARTITION_NAME: 'layers'},
    )()
    x = jax.random.normal(jax.random.key(1), (3, 4))
    variables = model.init(jax.random.key(0), x)
    box = variables['params']['w']
    assert isinstance(box, nn.Partitioned)
    assert box.names == ('layers', None, 'model')
    assert box.value.shape == (3, 4, 2)
    # Apply takes the boxes back (the axis is removed inside, re-added on the way out).
    y = model.apply(variables, x)
    np.testing.assert_allclose(y, jnp.einsum('bi,bio->bo', x, box.value), rtol=1e-5)


# ------------------------------------------------------------------ method form


def test_method_decorator_equals_class_wrapper():
    class Stacked(nn.Module):
        @functools.partial(nn.vmap, variable_axes={'params': 0}, split_rngs={'params': True})
        @nn.compact
        def __call__(self, x):
            return Dense(2)(x)

    x = jax.random.normal(jax.random.key(1), (3, 4))
    variables = Stacked().init(jax.random.key(0), x)
    w, b = variables['params']['Dense_0']['w'], variables['params']['Dense_0']['b']
    assert w.shape == (3, 4, 2)
    expected = jnp.stack([x[i] @ w[i] + b[i] for i in range(3)])
    np.testing.assert_allclose(Stacked().apply(variables, x), expected, rtol=1e-6)


def test_vmapped_class_as_a_submodule_keeps_its_name():
    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            return stacked_dense_cls()(2, name='heads')(x)

    def stacked_dense_cls():
        return nn.vmap(Dense, variable_axes={'params': 0}, split_rngs={'params': True})

    variables = Outer().init(jax.random.key(0), jnp.ones((3, 4)))
    assert set(variables['params']) == {'heads'}
    assert variables['params']['heads']['w'].shape == (3, 4, 2)


# ----------------------------------------------------------------------- errors


def test_axis_size_cannot_be_inferred_while_splitting_rngs():
    model = stacked_dense(in_axes=None)
    with pytest.raises(TransformAxisSizeError, match='axis_size='):
        model.init(jax.random.key(0), jnp.ones((4,)))


def test_a_mapped_variable_without_the_mapped_axis_is_named():
    # A setup-made variable under nn.jit is made outside the vmapped call, so it has no
    # mapped axis; Flax raises an IndexError there, JAX's vmap a ValueError.
    class Counter(nn.Module):
        def setup(self):
            self.count = self.variable('state', 'count', lambda: jnp.zeros(()))

        def __call__(self, x):
            self.count.value = self.count.value + 1.0
            return x + self.count.value

    stacked = nn.vmap(Counter, variable_axes={'state': 0}, split_rngs={'params': False})
    x = jnp.ones((2, 3))
    # Made inside the vmapped call: one count per slice.
    assert stacked().init(jax.random.key(0), x)['state']['count'].shape == (2,)
    with pytest.raises(VmapVariableAxisError, match=r'state/count in scope .* has shape \(\)'):
        nn.jit(stacked)().init(jax.random.key(0), x)
    with pytest.raises(IndexError):
        nn.jit(stacked)().init(jax.random.key(0), x)


def test_vmap_of_a_non_module_is_a_target_error():
    with pytest.raises(errors.TransformTargetError, match='Module class or a Module method'):
        nn.vmap(42, variable_axes={}, split_rngs={})


# --------------------------------------------------------------------------- HLO


def hlo_op_counts(compiled_text: str) -> Multiset:
    """Opcode counts of an HLO module, metadata and names stripped."""
    ops = Multiset()
    for line in compiled_text.splitlines():
        line = re.sub(r',?\s*metadata=\{[^}]*\}', '', line)
        m = re.match(r'\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*[^=]*?\s([a-z][\w\-]*)\(', line)
        if m:
            ops[m.group(1)] += 1
    return ops


def test_lifted_vmap_adds_no_hlo_instructions():
    x = jax.random.normal(jax.random.key(1), (3, 4))
    model = stacked_dense()
    variables = model.init(jax.random.key(0), x)
    ours = jax.jit(model.apply).lower(variables, x).compile().as_text()

    def pure(variables, x):
        p = variables['params']
        return jax.vmap(lambda w, b, x: x @ w + b)(p['w'], p['b'], x)

    ref = jax.jit(pure).lower(variables, x).compile().as_text()
    assert hlo_op_counts(ours) == hlo_op_counts(ref)
    assert sum(hlo_op_counts(ref).values()) > 0


class _Holder(nn.Module):
    sub: nn.Module

    def __call__(self, x):
        return self.sub(x)


def test_field_submodule_made_in_parent_setup_is_mapped_with_the_vmapped_module():
    mapped = nn.vmap(_Holder, variable_axes={'params': 0}, split_rngs={'params': True})

    class Parent(nn.Module):
        def setup(self):
            self.blocks = mapped(sub=Dense(3))

        def __call__(self, x):
            return self.blocks(x)

    x = jnp.arange(8.0).reshape(4, 2)
    variables = Parent().init(jax.random.key(0), x)
    p = variables['params']['blocks']['sub']
    assert p['w'].shape == (4, 2, 3) and p['b'].shape == (4, 3)
    y = Parent().apply(variables, x)
    want = jnp.einsum('ni,nio->no', x, p['w']) + p['b']
    np.testing.assert_allclose(y, want, rtol=1e-6)
    assert not np.allclose(p['w'][0], p['w'][1])  # split rngs: one kernel per row


def test_toplevel_field_submodules_are_mapped_under_a_vmapped_class():
    class Outer(nn.Module):
        inner: nn.Module

        def __call__(self, x):
            return self.inner(x)

    mapped = nn.vmap(Outer, variable_axes={'params': 0}, split_rngs={'params': True})
    x = jnp.ones((5, 2))
    variables = mapped(Dense(3)).init(jax.random.key(0), x)
    assert jax.tree_util.tree_map(jnp.shape, variables['params']) == {
        'inner': {'w': (5, 2, 3), 'b': (5, 3)}
    }
