"""initializers: the jax.nn.initializers set plus zeros_init/ones_init."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.layers import initializers

# Every initializer but the two ``*_init`` helpers is jax.nn.initializers' own.
JAX_NAMES = [n for n in initializers.__all__ if n not in ('zeros_init', 'ones_init')]


@pytest.mark.parametrize('name', JAX_NAMES)
def test_reexports_are_jax_functions(name):
    assert getattr(initializers, name) is getattr(jax.nn.initializers, name)


def test_surface_has_every_jax_initializer():
    public = {n for n in dir(jax.nn.initializers) if not n.startswith('_')}
    assert public <= set(initializers.__all__)
    assert {'zeros_init', 'ones_init'} <= set(initializers.__all__)


@pytest.mark.parametrize('dtype', [jnp.float32, jnp.bfloat16, jnp.int32])
def test_zeros_init_and_ones_init(dtype):
    key = jax.random.key(0)
    z = initializers.zeros_init()(key, (2, 3), dtype)
    o = initializers.ones_init()(key, (4,), dtype)
    assert z.dtype == dtype and o.dtype == dtype
    np.testing.assert_array_equal(np.asarray(z, np.float32), np.zeros((2, 3)))
    np.testing.assert_array_equal(np.asarray(o, np.float32), np.ones(4))


def test_reachable_from_the_facade():
    import linen.nn as nn

    assert nn.initializers.zeros_init is initializers.zeros_init
    assert nn.zeros is jax.nn.initializers.zeros
