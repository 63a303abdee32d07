"""Boxed partitioning metadata through init, apply, lifted transforms, serialization
and optax; the ``linen.nn.partitioning`` surface and its docstring examples."""

from __future__ import annotations

import doctest

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

import linen.nn as nn
from linen.core import serialization
from linen.core.errors import PartitioningUnspecifiedError
from linen.layers import partitioning

NAMES = ('embed', 'mlp')


def _kernel_init():
    return nn.with_logical_partitioning(nn.initializers.lecun_normal(), NAMES)


class Layer(nn.Module):
    @nn.compact
    def __call__(self, c, _=None):
        return jnp.tanh(nn.Dense(4, use_bias=False, kernel_init=_kernel_init())(c)), None


def _is_box(x):
    return isinstance(x, nn.Partitioned)


def _names(tree):
    boxes = jax.tree_util.tree_leaves(tree, is_leaf=_is_box)
    return [b.names for b in boxes if _is_box(b)]


def test_facade_exports_partitioning_module():
    from linen.nn import partitioning as via_facade

    assert via_facade is partitioning
    assert set(partitioning.__all__) >= {'param_with_axes', 'scan_with_axes', 'AxisMetadata'}


def test_docstring_examples_run():
    result = doctest.testmod(partitioning, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_init_and_apply_keep_boxes_and_compute_like_unboxed():
    x = jnp.linspace(-1.0, 1.0, 8).reshape(2, 4)
    variables = Layer().init(jax.random.key(0), x)
    box = variables['params']['Dense_0']['kernel']
    assert isinstance(box, nn.LogicallyPartitioned) and box.names == NAMES
    y, _ = Layer().apply(variables, x)
    expected = jnp.tanh(x @ box.value)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    y_unboxed, _ = Layer().apply(nn.unbox(variables), x)
    np.testing.assert_allclose(y_unboxed, expected, rtol=1e-6, atol=1e-6)


def _stacked(transform, **kw):
    class Stack(nn.Module):
        @nn.compact
        def __call__(self, x):
            return transform(
                Layer, variable_axes={'params': 0}, split_rngs={'params': True}, **kw
            )()(x)[0]

    return Stack()


@pytest.mark.parametrize('transform', ['scan', 'vmap'])
def test_scan_and_vmap_add_the_named_axis(transform):
    x = jnp.ones((2, 4)) * 0.5
    kw = {'length': 3} if transform == 'scan' else {'axis_size': 3, 'in_axes': None}
    meta = {nn.PARTITION_NAME: 'layers'}
    model = _stacked(getattr(nn, transform), metadata_params=meta, **kw)
    variables = model.init(jax.random.key(0), x)
    box = variables['params']['ScanLayer_0' if transform == 'scan' else 'VmapLayer_0']
    box = box['Dense_0']['kernel']
    assert box.names == ('layers', *NAMES) and box.value.shape == (3, 4, 4)
    y = model.apply(variables, x)  # the axis is removed on the way in, added on the way out
    w = box.value
    if transform == 'scan':
        expected = x
        for i in range(3):
            expected = jnp.tanh(expected @ w[i])
    else:
        expected = jnp.stack([jnp.tanh(x @ w[i]) for i in range(3)])
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('transform', ['scan', 'vmap'])
def test_stacked_axis_without_a_name_raises(transform):
    kw = {'length': 2} if transform == 'scan' else {'axis_size': 2, 'in_axes': None}
    model = _stacked(getattr(nn, transform), **kw)
    with pytest.raises(PartitioningUnspecifiedError, match='PARTITION_NAME'):
        model.init(jax.random.key(0), jnp.ones((2, 4)))


@pytest.mark.parametrize('wrap', ['remat', 'jit', 'map_variables'])
def test_remat_jit_and_map_variables_keep_metadata(wrap):
    if wrap == 'map_variables':
        wrapped = nn.map_variables(Layer, 'params', lambda t: t, lambda t: t, init=True)
    else:
        wrapped = getattr(nn, wrap)(Layer)
    x = jnp.ones((2, 4))
    variables = wrapped().init(jax.random.key(0), x)
    assert _names(variables) == [NAMES]
    y, _ = wrapped().apply(variables, x)
    kernel = jax.tree_util.tree_leaves(nn.unbox(variables))[0]
    np.testing.assert_allclose(y, jnp.tanh(x @ kernel), rtol=1e-6, atol=1e-6)


def test_serialization_round_trip_keeps_boxes():
    variables = Layer().init(jax.random.key(0), jnp.ones((2, 4)))
    data = serialization.to_bytes(variables)
    target = Layer().init(jax.random.key(1), jnp.ones((2, 4)))
    restored = serialization.from_bytes(target, data)
    assert _names(restored) == [NAMES]
    np.testing.assert_array_equal(
        restored['params']['Dense_0']['kernel'].value,
        variables['params']['Dense_0']['kernel'].value,
    )


def test_optax_update_keeps_boxes_and_matches_unboxed_update():
    x = jnp.linspace(-1.0, 1.0, 8).reshape(2, 4)
    params = Layer().init(jax.random.key(0), x)['params']
    tx = optax.adam(1e-2)

    def loss(p):
        return jnp.sum(Layer().apply({'params': p}, x)[0] ** 2)

    grads = jax.grad(loss)(params)
    assert _names(grads) == [NAMES]
    updates, _ = tx.update(grads, tx.init(params), params)
    new = optax.apply_updates(params, updates)
    assert _names(new) == [NAMES]

    plain = nn.unbox(params)
    plain_grads = jax.grad(lambda p: loss(p))(plain)
    plain_updates, _ = tx.update(plain_grads, tx.init(plain), plain)
    expected = optax.apply_updates(plain, plain_updates)
    np.testing.assert_allclose(
        nn.unbox(new)['Dense_0']['kernel'], expected['Dense_0']['kernel'], rtol=1e-6, atol=1e-7
    )


def test_get_partition_spec_of_boxed_tree_is_logical():
    variables = Layer().init(jax.random.key(0), jnp.ones((2, 4)))
    specs = nn.get_partition_spec(variables)
    assert specs['params']['Dense_0']['kernel'] == P(*NAMES)


def test_param_with_axes_of_a_pytree_param_keeps_the_names_tree():
    axes = {'a': ('embed', 'mlp'), 'b': (('embed', None), ('mlp', 'embed'))}

    def init_fn(key, shape):
        del key
        return {'a': jnp.ones(shape), 'b': (jnp.zeros(shape), jnp.ones(shape))}

    class Tree(nn.Module):
        @nn.compact
        def __call__(self, x):
            tree = nn.partitioning.param_with_axes('tree', init_fn, (2, 2), axes=axes)
            return x @ tree['a']

    variables = Tree().init(jax.random.key(0), jnp.ones((1, 2)))
    assert variables['params_axes']['tree_axes'] == nn.partitioning.AxisMetadata(names=axes)
    assert dict(nn.partitioning.get_axis_names(variables['params_axes'])) == {
        'tree': {'a': P('embed', 'mlp'), 'b': (P('embed', None), P('mlp', 'embed'))}
    }


@pytest.mark.parametrize(
    ('names', 'spec'),
    [
        (('embed', 'mlp'), P('embed', 'mlp')),
        ((), P()),
        ((None,), P(None)),
        (('embed', ('data', 'model')), P('embed', ('data', 'model'))),
    ],
)
def test_get_axis_names_reads_one_names_tuple_as_one_spec(names, spec):
    metadata = {'w_axes': nn.partitioning.AxisMetadata(names=names)}
    assert nn.partitioning.get_axis_names(metadata)['w'] == spec
