"""Flax as the oracle for ``WeightNorm`` around a layer whose parameters are boxed.

Sharded models build their layers with ``nn.with_partitioning`` /
``nn.with_logical_partitioning``; wrapped in ``WeightNorm`` the boxes must survive,
the ``scale`` parameters take Flax's names (the box's field is part of the path,
``Dense_0/kernel/value/scale``), and variables, outputs and gradients must be
bit-identical to Flax's.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import AxisType

import linen.nn as linen_nn

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')


def model(nn, logical):
    box = nn.with_logical_partitioning if logical else nn.with_partitioning

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            dense = nn.Dense(
                6,
                kernel_init=box(nn.initializers.lecun_normal(), ('embed', 'mlp')),
                bias_init=box(nn.initializers.normal(0.1), ('mlp',)),
            )
            y = nn.WeightNorm(dense, variable_filter={'kernel', 'bias'})(x)
            return nn.WeightNorm(nn.Dense(3), feature_axes=None)(y)

    return Model()


def run(nn, logical):
    m = model(nn, logical)
    x = jax.random.normal(jax.random.key(1), (2, 5))
    variables = m.init(jax.random.key(0), x)
    y = jax.jit(m.apply)(variables, x)
    grads = jax.jit(jax.grad(lambda v: m.apply(v, x).sum()))(variables)
    specs = nn.get_partition_spec(variables)
    return variables, y, grads, specs


def assert_identical(ours, theirs):
    leaves_a, tree_a = jax.tree_util.tree_flatten_with_path(ours)
    leaves_b, tree_b = jax.tree_util.tree_flatten_with_path(theirs)
    assert [p for p, _ in leaves_a] == [p for p, _ in leaves_b]
    for (path, a), (_, b) in zip(leaves_a, leaves_b):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, path
        np.testing.assert_array_equal(a, b, err_msg=str(path))


@pytest.mark.parametrize('logical', [False, True], ids=['partitioned', 'logically_partitioned'])
def test_weight_norm_over_boxed_params_matches_flax(logical):
    theirs = run(flax_nn, logical)
    ours = run(linen_nn, logical)
    names = sorted(ours[0]['params']['WeightNorm_0'])
    assert names == ['Dense_0/bias/value/scale', 'Dense_0/kernel/value/scale']
    assert names == sorted(theirs[0]['params']['WeightNorm_0'])
    for a, b in zip(ours[:3], theirs[:3]):
        assert_identical(linen_nn.meta.unbox(a), flax_nn.meta.unbox(b))
    # The boxes (and so the shardings derived from them) are kept.
    assert (
        type(ours[0]['params']['Dense_0']['kernel']).__name__
        == type(theirs[0]['params']['Dense_0']['kernel']).__name__
    )
    assert jax.tree_util.tree_leaves(ours[3]) == jax.tree_util.tree_leaves(theirs[3])


def test_weight_norm_over_partitioned_params_initializes_sharded_as_flax():
    mesh = jax.make_mesh((2, 2), ('embed', 'mlp'), axis_types=(AxisType.Auto,) * 2)
    x = jax.random.normal(jax.random.key(1), (2, 4))

    def sharded(nn):
        m = model(nn, logical=False)
        with jax.set_mesh(mesh):
            abstract = jax.eval_shape(m.init, jax.random.key(0), x)
            shardings = nn.get_sharding(abstract, mesh)
            variables = jax.jit(m.init, out_shardings=shardings)(jax.random.key(0), x)
            return variables, jax.jit(m.apply)(variables, x)

    (ours_vars, ours_y), (theirs_vars, theirs_y) = sharded(linen_nn), sharded(flax_nn)
    kernel = ours_vars['params']['Dense_0']['kernel'].value
    assert kernel.sharding.spec == theirs_vars['params']['Dense_0']['kernel'].value.sharding.spec
    assert_identical(linen_nn.meta.unbox(ours_vars), flax_nn.meta.unbox(theirs_vars))
    np.testing.assert_array_equal(np.asarray(ours_y), np.asarray(theirs_y))
