"""Flax as the oracle for logical axis rules where Flax falls back silently.

A logical name no rule maps is replicated, a rule written twice is dead, a spec
shorter than the array leaves the rest replicated, and ``with_logical_constraint``
with rules but no mesh does nothing: Flax does each without a word, and its own
partitioning tests run with warnings as errors. The same programs must run here
under ``-W error`` with the same values and shardings; the diagnosis stays behind
``linen_strict_logical_rules``, where each case raises.

Meshes use the suite's 4 host devices (2x2).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import linen.nn as linen_nn
from linen.core import config
from linen.core.errors import LogicalAxisRulesError

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')

RULES = (('batch', 'data'), ('embed', 'model'))


def _mesh():
    return jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Auto,) * 2)


def dense_program(nn, rules):
    """A Dense whose kernel carries a logical axis ('mlp') that no rule maps."""

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.with_logical_constraint(x, ('batch', 'embed'))
            y = nn.Dense(
                8,
                kernel_init=nn.with_logical_partitioning(
                    nn.initializers.lecun_normal(), ('embed', 'mlp')
                ),
            )(x)
            return nn.with_logical_constraint(y, ('batch', 'mlp'))

    model = Model()
    x = jax.random.normal(jax.random.key(1), (4, 6))
    mesh = _mesh()
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        abstract = jax.eval_shape(model.init, jax.random.key(0), x)
        specs = nn.get_partition_spec(abstract)
        shardings = nn.logical_to_mesh_sharding(specs, mesh, rules)
        variables = jax.jit(model.init, out_shardings=shardings)(jax.random.key(0), x)
        y = jax.jit(model.apply)(variables, x)
    kernel = variables['params']['Dense_0']['kernel']
    return kernel.value, kernel.value.sharding.spec, y, y.sharding.spec


@pytest.mark.parametrize(
    'rules',
    [RULES, RULES + (('embed', 'model'),)],
    ids=['unmapped_name', 'duplicate_rule'],
)
def test_fallbacks_are_silent_and_shard_as_flax(rules):
    theirs = dense_program(flax_nn, rules)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        ours = dense_program(linen_nn, rules)
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[2], theirs[2])
    assert ours[1] == theirs[1] == P('model', None)
    assert ours[3] == theirs[3]
    with config.temp_flip_flag('strict_logical_rules', True):
        # The duplicate is met first at the input's constraint (an activation).
        match = 'Duplicate logical axis rule' if len(rules) > 2 else "'mlp' at .params/Dense_0"
        with pytest.raises(LogicalAxisRulesError, match=match):
            dense_program(linen_nn, rules)


def constraint_program(nn, names, use_mesh):
    x = jnp.arange(16.0).reshape(4, 4)
    with nn.logical_axis_rules(RULES):
        if use_mesh:
            with jax.set_mesh(_mesh()):
                return jax.jit(lambda v: nn.with_logical_constraint(v * 2, names))(x)
        return jax.jit(lambda v: nn.with_logical_constraint(v * 2, names))(x)


@pytest.mark.parametrize(
    'names, use_mesh',
    [(('batch', 'embed'), False), (('batch',), True)],
    ids=['rules_without_mesh', 'short_spec'],
)
def test_constraints_are_silent_and_place_values_as_flax(names, use_mesh):
    theirs = constraint_program(flax_nn, names, use_mesh)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        ours = constraint_program(linen_nn, names, use_mesh)
    np.testing.assert_array_equal(ours, theirs)
    if use_mesh:
        # Flax sends the short spec to JAX, which replicates the trailing dimension.
        assert ours.sharding.is_equivalent_to(theirs.sharding, 2)
        assert ours.sharding.is_equivalent_to(NamedSharding(_mesh(), P('data', None)), 2)
    with config.temp_flip_flag('strict_logical_rules', True):
        with pytest.raises(LogicalAxisRulesError, match='no mesh' if not use_mesh else 'rank 2'):
            constraint_program(linen_nn, names, use_mesh)
