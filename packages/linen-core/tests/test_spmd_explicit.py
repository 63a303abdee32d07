"""Constraints under Auto, Explicit and mixed mesh axes, with ``jax.set_mesh``, the
legacy ``with mesh:`` and an explicit ``mesh=``. Meshes of the suite's 4 host
devices: 2x2 and 1x4."""

from __future__ import annotations

import contextlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from linen.core import meta, spmd

RULES = (('batch', 'data'), ('embed', 'model'))
AUTO, EXPLICIT = AxisType.Auto, AxisType.Explicit
TYPES = {'auto': (AUTO, AUTO), 'explicit': (EXPLICIT, EXPLICIT), 'mixed': (EXPLICIT, AUTO)}


def _context(kind, mesh):
    if kind == 'set_mesh':
        return jax.set_mesh(mesh)
    if kind == 'legacy':
        stack = contextlib.ExitStack()
        # Newer JAX deprecates `with mesh:` (0.10.0 does not warn); linen honours it.
        stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings('ignore', '.*set_mesh', DeprecationWarning)
        stack.enter_context(mesh)
        return stack
    return contextlib.nullcontext()


# The legacy `with mesh:` predates explicit axes, and JAX runs a jit over explicit
# axes only inside `jax.set_mesh`, so those two contexts are tested on Auto meshes.
CASES = [(t, 'set_mesh') for t in TYPES] + [('auto', 'legacy'), ('auto', 'mesh_arg')]


@pytest.mark.parametrize('shape', [(2, 2), (1, 4)])
@pytest.mark.parametrize(('types', 'context'), CASES)
def test_with_logical_constraint_places_the_value(shape, types, context):
    mesh = jax.make_mesh(shape, ('data', 'model'), axis_types=TYPES[types])
    x = jnp.arange(32.0).reshape(4, 8)
    mesh_arg = mesh if context == 'mesh_arg' else None
    with _context(context, mesh):
        f = jax.jit(
            lambda v: spmd.with_logical_constraint(v * 2, ('batch', 'embed'), RULES, mesh_arg)
        )
        y = f(x)
    np.testing.assert_array_equal(y, x * 2)
    if types == 'mixed':
        # The explicit 'data' axis is guaranteed; 'model' (auto) is up to the compiler.
        # A size-1 'data' axis shards nothing, and JAX 0.10.0 drops it from the spec.
        spec = tuple(y.sharding.spec) + (None, None)
        assert spec[0] == 'data' or mesh.shape['data'] == 1
    else:
        assert y.sharding.is_equivalent_to(NamedSharding(mesh, P('data', 'model')), 2)


@pytest.mark.parametrize('types', list(TYPES))
def test_partitioned_unbox_reshards_under_explicit_axes(types):
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES[types])
    box = meta.Partitioned(jnp.ones((4, 4)), ('data', None))
    with jax.set_mesh(mesh):
        out = jax.jit(lambda b: b.unbox() + 1)(box)
    np.testing.assert_array_equal(out, jnp.full((4, 4), 2.0))
    assert out.sharding.spec[0] == 'data'


def test_constraint_under_explicit_axes_is_a_reshard_not_an_assert():
    # Plain JAX refuses this: the input is replicated, the constraint asks for 'data'.
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES['explicit'])
    x = jnp.ones((4, 4))
    with jax.set_mesh(mesh):
        with pytest.raises(Exception, match='assert'):
            jax.jit(lambda v: jax.lax.with_sharding_constraint(v, P('data', None)))(x)
        y = jax.jit(lambda v: spmd.with_logical_constraint(v, ('batch', None), RULES))(x)
    assert y.sharding.spec == P('data', None)


@pytest.mark.parametrize('types', ['explicit', 'mixed'])
def test_legacy_mesh_context_reshards_arrays_placed_on_explicit_axes(types):
    # Under `with mesh:` JAX's abstract mesh is empty; an input already placed on the
    # mesh tells jit the devices, and the constraint reshards onto the context mesh.
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES[types])
    x = jax.device_put(jnp.arange(16.0).reshape(4, 4), NamedSharding(mesh, P()))
    with _context('legacy', mesh):
        y = jax.jit(lambda v: spmd.with_logical_constraint(v + 1, ('batch', 'embed'), RULES))(x)
        z = jax.jit(lambda b: b.unbox() * 2)(meta.Partitioned(x, ('data', None)))
    np.testing.assert_array_equal(y, x + 1)
    np.testing.assert_array_equal(z, x * 2)
    assert y.sharding.spec[0] == 'data' and z.sharding.spec[0] == 'data'
    if types == 'explicit':
        assert y.sharding.spec == P('data', 'model')
