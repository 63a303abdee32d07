"""Flax as oracle for the layers on sharded meshes (the suite's 4 host devices, 2x2).

On Auto mesh axes linen adds nothing to a layer's program: its lowered StableHLO is
Flax's, text for text, with a contracted dimension sharded on both sides. On
Explicit axes Flax raises ``ShardingTypeError`` there, and linen computes Flax's
numbers (``packages/linen-layers/tests/test_explicit_sharding.py`` checks them
against NumPy in more layouts). In the Explicit layouts Flax accepts, ``Dense`` is
Flax's bit for bit: values, gradients (eager and jitted), shardings, lowered program.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import linen.nn as linen_nn

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')


def _layers(nn):
    return {
        'DenseGeneral': nn.DenseGeneral((2, 4)),
        'Einsum': nn.Einsum((8, 4), 'abc,cd->abd'),
        'Conv': nn.Conv(4, (3,)),
        'ConvTranspose': nn.ConvTranspose(4, (3,)),
    }


# The kernel's input-feature dimension (contracted against the input's last axis).
KERNEL_SPECS = {
    'DenseGeneral': P('model', None, None),
    'Einsum': P('model', None),
    'Conv': P(None, 'model', None),
    'ConvTranspose': P(None, 'model', None),
}


def _placed(variables, mesh, kernel_spec):
    return jax.tree_util.tree_map_with_path(
        lambda path, a: jax.device_put(
            a, NamedSharding(mesh, kernel_spec if 'kernel' in jax.tree_util.keystr(path) else P())
        ),
        variables,
    )


@pytest.mark.parametrize('name', list(KERNEL_SPECS))
def test_auto_axes_lower_to_flaxs_program(name):
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Auto,) * 2)
    x = jnp.ones((4, 6, 8))
    ours, theirs = _layers(linen_nn)[name], _layers(flax_nn)[name]
    variables = theirs.init(jax.random.key(0), x)
    with jax.set_mesh(mesh):
        placed = _placed(variables, mesh, KERNEL_SPECS[name])
        xs = jax.device_put(x, NamedSharding(mesh, P('data', None, 'model')))
        ours_text = jax.jit(ours.apply).lower(placed, xs).as_text()
        theirs_text = jax.jit(theirs.apply).lower(placed, xs).as_text()
    assert ours_text == theirs_text


@pytest.mark.parametrize('name', ['DenseGeneral', 'Conv'])
def test_explicit_axes_give_flaxs_numbers_where_flax_raises(name):
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Explicit,) * 2)
    x = jax.random.normal(jax.random.key(1), (4, 6, 8))
    ours, theirs = _layers(linen_nn)[name], _layers(flax_nn)[name]
    variables = theirs.init(jax.random.key(0), x)
    expected = theirs.apply(variables, x)
    with jax.set_mesh(mesh):
        placed = _placed(variables, mesh, KERNEL_SPECS[name])
        xs = jax.device_put(x, NamedSharding(mesh, P('data', None, 'model')))
        with pytest.raises(Exception, match='out_sharding'):  # JAX's ShardingTypeError
            jax.jit(theirs.apply)(placed, xs)
        y = jax.jit(ours.apply)(placed, xs)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    assert y.sharding.spec[0] == 'data'


# Layouts Flax accepts on Explicit axes (no contracted dimension sharded on both sides).
ACCEPTED_DENSE_LAYOUTS = {
    'replicated kernel, batch-sharded input': (P(), P('data')),
    'feature-sharded kernel, batch-sharded input': (P(None, 'model'), P('data')),
    'replicated kernel, input sharded on batch and length': (P(), P('data', 'model')),
    'feature-sharded kernel, replicated input': (P(None, 'model'), P()),
}


@pytest.mark.parametrize('layout', list(ACCEPTED_DENSE_LAYOUTS))
def test_dense_on_explicit_axes_flax_accepts_is_flax_bit_for_bit(layout):
    # Where Flax runs the program, linen runs Flax's: the same values and shardings,
    # op by op under an eager grad too, and the same lowered program under jit. A
    # rank-3 input into 98 features: near the 99 whose eager kernel gradient once
    # rounded differently without a mesh (99 does not divide over the 'model' axis).
    kernel_spec, input_spec = ACCEPTED_DENSE_LAYOUTS[layout]
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Explicit,) * 2)
    x = jax.random.normal(jax.random.key(1), (4, 6, 8))
    ours, theirs = linen_nn.Dense(98), flax_nn.Dense(98)
    variables = theirs.init(jax.random.key(0), x)
    with jax.set_mesh(mesh):
        placed = _placed(variables, mesh, kernel_spec)
        xs = jax.device_put(x, NamedSharding(mesh, input_spec))
        results = []
        for module in (ours, theirs):

            def loss(v, x, module=module):
                return (module.apply(v, x) ** 2).sum()

            grad = jax.grad(loss, argnums=(0, 1))
            results.append(
                (
                    module.apply(placed, xs),
                    grad(placed, xs),
                    jax.jit(grad)(placed, xs),
                    jax.jit(module.apply).lower(placed, xs).as_text(),
                )
            )
    (*ours_values, ours_text), (*theirs_values, theirs_text) = results
    assert ours_text == theirs_text
    ours_leaves = jax.tree_util.tree_leaves(ours_values)
    theirs_leaves = jax.tree_util.tree_leaves(theirs_values)
    assert len(ours_leaves) == len(theirs_leaves) == 7
    for a, b in zip(ours_leaves, theirs_leaves, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
        assert a.sharding.is_equivalent_to(b.sharding, a.ndim)
