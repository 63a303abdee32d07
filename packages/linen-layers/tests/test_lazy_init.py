"""``lazy_init`` on layers: concrete variables, and none of the forward pass is run."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import config, errors


class DenseStack(nn.Module):
    width: int = 16
    depth: int = 3

    @nn.compact
    def __call__(self, x):
        for _ in range(self.depth):
            x = nn.relu(nn.Dense(self.width)(x))
        return nn.Dense(2)(x)


def _primitive_names(closed_jaxpr) -> set[str]:
    """Every primitive in a jaxpr, sub-jaxprs (jit, custom_jvp, ...) included."""
    names = set()

    def visit(jaxpr):
        names.update(eqn.primitive.name for eqn in jaxpr.eqns)
        for sub in jax.extend.core.subjaxprs(jaxpr):
            visit(sub)

    visit(closed_jaxpr.jaxpr)
    return names


def test_lazy_init_jaxpr_holds_the_initialisers_and_no_forward_pass():
    sds = jax.ShapeDtypeStruct((4, 8), jnp.float32)
    lazy = jax.make_jaxpr(lambda key: DenseStack().lazy_init(key, sds))(jax.random.key(0))
    full = jax.make_jaxpr(lambda key: DenseStack().init(key, jnp.ones((4, 8))))(jax.random.key(0))
    # The forward pass of init (the matmuls) is there in init's jaxpr ...
    assert 'dot_general' in _primitive_names(full)
    # ... and gone from lazy_init's, which still draws the kernels (lecun_normal:
    # random bits through erf_inv) and returns every variable.
    names = _primitive_names(lazy)
    assert 'dot_general' not in names
    assert {'random_bits', 'erf_inv'} <= names
    shapes = [a.shape for a in lazy.out_avals]
    assert sorted(shapes) == sorted(
        [(8, 16), (16,), (16, 16), (16,), (16, 16), (16,), (16, 2), (2,)]
    )


def test_lazy_init_with_a_concrete_key_runs_the_initialisers_and_not_the_forward_pass():
    # The key is concrete here, so the initialisers run at once (the jaxpr holds only
    # the resulting constants); the forward pass on the abstract input is never staged.
    key = jax.random.key(0)
    sds = jax.ShapeDtypeStruct((4, 8), jnp.float32)
    closed = jax.make_jaxpr(lambda: DenseStack().lazy_init(key, sds))()
    assert 'dot_general' not in _primitive_names(closed)
    eager = DenseStack().init(key, jnp.ones((4, 8)))
    for a, b in zip(closed.consts, jax.tree_util.tree_leaves(eager)):
        np.testing.assert_array_equal(a, b)


def test_lazy_init_equals_init_and_skips_work_on_a_concrete_input_too():
    key = jax.random.key(1)
    x = jax.random.normal(jax.random.key(2), (4, 8))
    lazy = DenseStack().lazy_init(key, x)
    eager = DenseStack().init(key, x)
    assert jax.tree_util.tree_structure(lazy) == jax.tree_util.tree_structure(eager)
    for a, b in zip(jax.tree_util.tree_leaves(lazy), jax.tree_util.tree_leaves(eager)):
        assert isinstance(a, jax.Array)
        np.testing.assert_array_equal(a, b)


class KeepsMean(nn.Module):
    @nn.compact
    def __call__(self, x):
        self.variable('stats', 'mean', lambda: 1.0 + x.mean(0))
        return nn.Dense(2)(x)


def test_lazy_init_of_a_variable_that_needs_the_abstract_input_reads_it_as_zeros():
    sds = jax.ShapeDtypeStruct((4, 3), jnp.float32)
    key = jax.random.key(0)
    lazy = KeepsMean().lazy_init(key, sds)
    np.testing.assert_array_equal(lazy['stats']['mean'], np.ones(3, np.float32))
    # The other variables are init's (the same keys draw the same kernel).
    eager = KeepsMean().init(key, jnp.zeros((4, 3)))
    np.testing.assert_array_equal(
        lazy['params']['Dense_0']['kernel'], eager['params']['Dense_0']['kernel']
    )


def test_strict_lazy_init_on_a_variable_that_needs_the_abstract_input_is_a_typed_error():
    sds = jax.ShapeDtypeStruct((4, 3), jnp.float32)
    with config.temp_flip_flag('strict_lazy_init', True):
        with pytest.raises(errors.LazyInitError, match='stats/mean'):
            KeepsMean().lazy_init(jax.random.key(0), sds)
