"""``lazy_init`` against Flax's: same arguments, same (concrete) variables."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

import flax.linen as flax_nn  # noqa: E402

import linen.nn as linen_nn  # noqa: E402


def model(nn):
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            x = nn.Dense(8)(x)
            x = nn.BatchNorm(use_running_average=not train)(x)
            x = nn.Dropout(0.5, deterministic=not train)(x)
            if train:  # a Python branch on a concrete flag
                x = nn.Dense(4, name='train_head')(x)
            return nn.Dense(2)(nn.relu(x))

    return Net()


@pytest.mark.parametrize('train', [True, False])
def test_lazy_init_gives_flax_variables(train):
    rngs = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}
    sds = jax.ShapeDtypeStruct((3, 5), jnp.float32)
    ours = model(linen_nn).lazy_init(rngs, sds, train)
    theirs = model(flax_nn).lazy_init(rngs, sds, train)
    theirs = flax_nn.meta.unbox(theirs)
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(dict(theirs))
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert isinstance(a, jax.Array) and isinstance(b, jax.Array)
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def lifted_model(nn, kind):
    """A model whose variables are created inside the lifted transform ``kind``.

    The forward input flows into the same JAX primitive (``remat``, ``scan``,
    ``vmap``) as the initialisers, so only an analysis through that
    primitive can tell the variables do not depend on it.
    """

    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            h = nn.Dense(3)(c + x)
            return h, h

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            if kind == 'remat':
                return nn.remat(nn.Dense)(3)(x)
            if kind == 'scan':
                stack = nn.scan(
                    Cell, variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=0
                )
                return stack()(jnp.zeros(x.shape[1:], x.dtype), x)[1]
            if kind == 'vmap':
                return nn.vmap(nn.Dense, variable_axes={'params': 0}, split_rngs={'params': True})(
                    3
                )(x)
            raise ValueError(kind)

    return Net()


LIFTED = ['remat', 'scan', 'vmap']


@pytest.mark.parametrize('kind', LIFTED)
def test_lazy_init_sees_through_lifted_transforms_as_flax(kind):
    # Flax's partial evaluation goes inside the transform's primitive and finds the
    # variables depend on the key alone; linen must give those variables, not an error.
    sds = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    key = jax.random.key(0)
    ours = lifted_model(linen_nn, kind).lazy_init(key, sds)
    theirs = flax_nn.meta.unbox(lifted_model(flax_nn, kind).lazy_init(key, sds))
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(dict(theirs))
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert isinstance(a, jax.Array) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    # Under an outer jit the same analysis runs on the staged path.
    staged = jax.jit(lambda k: lifted_model(linen_nn, kind).lazy_init(k, sds))(key)
    for a, b in zip(jax.tree_util.tree_leaves(staged), jax.tree_util.tree_leaves(ours)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_lazy_init_of_nn_jit_gives_the_variables_of_init():
    # nn.jit keeps the path-derived rng in linen (docs/differences.md), so the oracle
    # here is linen's own init on a concrete input, not Flax.
    x = jnp.ones((2, 3))
    model = lifted_jit_model()
    expected = model.init(jax.random.key(0), x)
    got = model.lazy_init(jax.random.key(0), jax.ShapeDtypeStruct(x.shape, x.dtype))
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_array_equal(a, b)


def lifted_jit_model():
    class Net(linen_nn.Module):
        @linen_nn.compact
        def __call__(self, x):
            return linen_nn.jit(linen_nn.Dense)(3)(x)

    return Net()


def test_lazy_init_under_a_traced_cond_names_the_branch_variables():
    # Which branch creates the variables depends on the input: linen says so rather
    # than returning one branch's variables (docs/differences.md).
    class Net(linen_nn.Module):
        @linen_nn.compact
        def __call__(self, x):
            return linen_nn.cond(
                jnp.sum(x) > 0,
                lambda mdl, x: linen_nn.Dense(2, name='branch')(x),
                lambda mdl, x: -linen_nn.Dense(2, name='branch')(x),
                self,
                x,
            )

    sds = jax.ShapeDtypeStruct((3,), jnp.float32)
    with pytest.raises(linen_nn.errors.LazyInitError, match='params/branch/kernel'):
        Net().lazy_init(jax.random.key(0), sds)
