"""Rule problems: an error naming the parameter path and the axis in strict mode,
one warning per cause otherwise. Meshes use the suite's 4 host devices (2x2)."""

from __future__ import annotations

import pickle
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from linen.core import config, meta, spmd
from linen.core.config import Config
from linen.core.errors import LogicalAxisRulesError

RULES = (('batch', 'data'), ('embed', 'model'))


def _mesh():
    return jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Auto,) * 2)


def _specs():
    return {'params': {'Dense_0': {'kernel': P('embed', 'mlp')}}}


def test_unmapped_name_raises_with_path_and_axis_in_strict_mode():
    with spmd.logical_axis_rules(RULES, strict=True):
        with pytest.raises(
            LogicalAxisRulesError, match=r"Logical axis 'mlp' at \"params/Dense_0/kernel\""
        ):
            spmd.logical_to_mesh_sharding(_specs(), _mesh())


def test_unmapped_name_is_replicated_silently_without_strict_mode():
    with spmd.logical_axis_rules(RULES), warnings.catch_warnings():
        warnings.simplefilter('error')
        sh = spmd.logical_to_mesh_sharding(_specs(), _mesh())
    assert sh['params']['Dense_0']['kernel'].spec == P('model', None)


def test_duplicate_rules_name_the_parameter_and_the_axis():
    dup = (('batch', 'data'), ('embed', 'model'), ('embed', 'model'), ('mlp', None))
    with spmd.logical_axis_rules(dup, strict=True):  # entering the rules is fine
        with pytest.raises(
            LogicalAxisRulesError,
            match=r"Duplicate logical axis rule \('embed', 'model'\) for logical axis 'embed' "
            r'at "params/Dense_0/kernel"',
        ):
            spmd.logical_to_mesh_sharding(_specs(), _mesh())
    with spmd.logical_axis_rules(dup), warnings.catch_warnings():
        warnings.simplefilter('error')
        sh = spmd.logical_to_mesh_sharding(_specs(), _mesh())
    assert sh['params']['Dense_0']['kernel'].spec == P('model', None)


def test_conflicting_rules_raise_in_strict_mode_and_are_fallbacks_otherwise():
    rules = (('batch', 'data'), ('embed', 'data'), ('embed', 'model'), ('mlp', None))
    with spmd.logical_axis_rules(rules, strict=True):
        with pytest.raises(
            LogicalAxisRulesError,
            match=r"Conflicting logical axis rules for 'embed' at \"params/Dense_0/kernel\": "
            r"\('embed', 'data'\) and \('embed', 'model'\)",
        ):
            spmd.logical_to_mesh_sharding(_specs(), _mesh())
        # A rule set that no array applies raises nothing.
        assert spmd.logical_to_mesh_axes(('batch',)) == P('data')
    with spmd.logical_axis_rules(rules):  # Flax's priority fallback: silent
        assert spmd.logical_to_mesh_axes(('batch', 'embed')) == P('data', 'model')


def test_two_logical_axes_on_one_mesh_axis():
    rules = (('embed', 'model'), ('mlp', 'model'))
    with spmd.logical_axis_rules(rules, strict=True):
        with pytest.raises(
            LogicalAxisRulesError,
            match=r"Logical axes 'embed' and 'mlp' at \"params/Dense_0/kernel\".*"
            r"mesh axis 'model'",
        ):
            spmd.logical_to_mesh_sharding(_specs(), _mesh())
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # Flax replicates the second one silently
        with spmd.logical_axis_rules(rules):
            sh = spmd.logical_to_mesh_sharding(_specs(), _mesh())
        # An activation (no parameter path) keeps Flax's fallback in strict mode too:
        # FSDP puts the batch and the embedding on one mesh axis on purpose.
        fsdp = (('batch', 'data'), ('embed', 'data'))
        with jax.set_mesh(_mesh()), spmd.logical_axis_rules(fsdp, strict=True):
            y = jax.jit(lambda x: spmd.with_logical_constraint(x, ('batch', 'embed')))(
                jnp.ones((4, 4))
            )
    assert sh['params']['Dense_0']['kernel'].spec == P('model', None)
    assert y.sharding.is_equivalent_to(NamedSharding(_mesh(), P('data', None)), 2)


@pytest.mark.parametrize('strict', [True, False])
def test_nonexistent_mesh_axis_raises_with_path_and_axis(strict):
    # Flax raises JAX's ValueError here in every mode; its words come first.
    rules = (('embed', 'tensor'), ('mlp', None))
    with spmd.logical_axis_rules(rules, strict=strict):
        with pytest.raises(LogicalAxisRulesError) as info:
            spmd.logical_to_mesh_sharding(_specs(), _mesh())
    message = str(info.value)
    assert message.startswith(
        "Resource axis: tensor of P('tensor', None) is not found in mesh: ('data', 'model')."
    ), message
    assert '"params/Dense_0/kernel"' in message and "logical axis 'embed'" in message
    assert isinstance(info.value, ValueError)


def test_rank_mismatch_of_a_boxed_parameter_names_its_path():
    box = spmd.LogicallyPartitioned(jnp.ones((4, 3)), ('embed',), rules=RULES)
    with spmd.logical_axis_rules(RULES, strict=True):
        with pytest.raises(
            LogicalAxisRulesError, match=r"\('embed',\) at \"params/w\" have 1 entries.*\(4, 3\)"
        ):
            meta.get_sharding({'params': {'w': box}}, _mesh())


def test_rank_mismatch_in_a_constraint():
    with jax.set_mesh(_mesh()), spmd.logical_axis_rules(RULES, strict=True):
        with pytest.raises(LogicalAxisRulesError, match='rank 2'):
            spmd.with_logical_constraint(jnp.ones((4, 4)), ('batch',))


def test_constraint_without_a_mesh_raises_in_strict_mode():
    with spmd.logical_axis_rules(RULES, strict=True):
        with pytest.raises(LogicalAxisRulesError, match='no mesh'):
            spmd.with_logical_constraint(jnp.ones(4), ('batch',))


def test_config_flag_turns_strict_mode_on():
    config.update('linen_strict_logical_rules', True)
    try:
        with spmd.logical_axis_rules(RULES):
            assert spmd.strict_logical_rules()
            with pytest.raises(LogicalAxisRulesError, match="'mlp'"):
                spmd.logical_to_mesh_axes(('mlp',))
        with spmd.logical_axis_rules(RULES, strict=False):  # the context wins
            assert not spmd.strict_logical_rules()
    finally:
        config.update('linen_strict_logical_rules', False)


def test_environment_variable_sets_the_flag(monkeypatch):
    monkeypatch.setenv('LINEN_STRICT_LOGICAL_RULES', '1')
    assert Config().linen_strict_logical_rules is True
    monkeypatch.setenv('LINEN_STRICT_LOGICAL_RULES', '0')
    assert Config().linen_strict_logical_rules is False


def test_error_pickles():
    err = LogicalAxisRulesError('Logical axis \'mlp\' at "params/w" ...')
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is LogicalAxisRulesError and str(again) == str(err)
    assert isinstance(again, ValueError)


def _dense_like(names, shape=(4, 3)):
    """A functional model whose parameter ``params/Dense_0/kernel`` is boxed with ``names``."""
    from linen.core import scope as core_scope

    def model(scope, x):
        init = spmd.with_logical_partitioning(jax.nn.initializers.ones, names)
        kernel = scope.push('Dense_0').param('kernel', init, shape)
        return x @ kernel

    x = jnp.ones((2, shape[0]))
    _, variables = core_scope.init(model)(jax.random.key(0), x)
    return core_scope.apply(model), variables, x


@pytest.mark.parametrize(
    ('names', 'rules', 'shape', 'axis'),
    [
        # a logical name no rule maps
        (('embed', 'mlp'), (('embed', 'model'),), (4, 3), "'mlp'"),
        # a rule naming a mesh axis the mesh lacks
        (('embed', 'mlp'), (('embed', 'tensor'), ('mlp', None)), (4, 3), "'tensor'"),
        # names whose rank differs from the parameter's
        (('embed',), (('embed', 'model'),), (4, 3), r"\('embed',\)"),
        # the same rule twice
        (
            ('embed', 'mlp'),
            (('embed', 'model'), ('embed', 'model'), ('mlp', None)),
            (4, 3),
            "'embed'",
        ),
        # two rules for one logical name
        (
            ('embed', 'mlp'),
            (('embed', 'model'), ('embed', 'data'), ('mlp', None)),
            (4, 3),
            "'embed'",
        ),
        # two logical dimensions on one mesh axis
        (('embed', 'mlp'), (('embed', 'model'), ('mlp', 'model')), (4, 3), "'model'"),
        # a duplicated logical name in the array (an error in Flax too)
        (('embed', 'embed'), (('embed', 'model'),), (4, 4), "'embed'"),
    ],
    ids=['unmapped', 'mesh_axis', 'rank', 'duplicate', 'conflict', 'one_mesh_axis', 'dup_name'],
)
def test_a_parameter_unboxed_in_apply_names_its_path_and_the_axis(names, rules, shape, axis):
    apply_fn, variables, x = _dense_like(names, shape)
    with jax.set_mesh(_mesh()), spmd.logical_axis_rules(rules, strict=True):
        with pytest.raises(LogicalAxisRulesError) as info:
            apply_fn(variables, x)
    message = str(info.value)
    assert 'params/Dense_0/kernel' in message
    assert re.search(axis, message), message


def test_an_unmapped_parameter_axis_is_replicated_silently_without_strict_mode():
    apply_fn, variables, x = _dense_like(('embed', 'mlp2'))
    with jax.set_mesh(_mesh()), spmd.logical_axis_rules((('embed', 'model'),)):
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            jax.jit(apply_fn)(variables, x)


def test_raise_error_fallback_names_the_unmatched_axis():
    with jax.set_mesh(_mesh()):
        with pytest.raises(LogicalAxisRulesError, match=r"unmatched: \['mlp'\]"):
            spmd.with_logical_constraint(
                jnp.ones((4, 4)),
                ('embed', 'mlp'),
                (('embed', 'model'), ('batch', 'data')),
                fallback=spmd.RulesFallback.RAISE_ERROR,
            )


def test_constraint_without_a_mesh_names_the_axes():
    with spmd.logical_axis_rules(RULES, strict=True):
        with pytest.raises(LogicalAxisRulesError, match=r"no mesh \(names \('batch', 'embed'\)"):
            spmd.with_logical_constraint(jnp.ones((4, 4)), ('batch', 'embed'))


def test_a_mesh_axis_missing_from_with_partitioning_names_the_path_and_the_axis():
    from linen.core import scope as core_scope

    def model(scope, x):
        init = meta.with_partitioning(jax.nn.initializers.ones, (None, 'tensor'))
        return x @ scope.push('Dense_0').param('kernel', init, (4, 3))

    x = jnp.ones((2, 4))
    _, variables = core_scope.init(model)(jax.random.key(0), x)
    expected = (
        r"^Resource axis: tensor of P\(None, 'tensor'\) is not found in mesh: "
        r"\('data', 'model'\)\..*'tensor'.*dimension 1 of \"params/Dense_0/kernel\""
    )
    with pytest.raises(LogicalAxisRulesError, match=expected):
        meta.get_sharding(variables, _mesh())
    with jax.set_mesh(_mesh()), pytest.raises(LogicalAxisRulesError, match=expected):
        core_scope.apply(model)(variables, x)


def test_rules_given_to_with_logical_partitioning_are_checked_at_the_parameter():
    from linen.core import scope as core_scope

    conflicting = (('embed', 'model'), ('embed', 'data'), ('mlp', None))

    def model(scope, x):
        init = spmd.with_logical_partitioning(
            jax.nn.initializers.ones, ('embed', 'mlp'), rules=conflicting
        )
        return x @ scope.push('Dense_0').param('kernel', init, (4, 3))

    x = jnp.ones((2, 4))
    _, variables = core_scope.init(model)(jax.random.key(0), x)
    with jax.set_mesh(_mesh()), spmd.logical_axis_rules((), strict=True):
        with pytest.raises(
            LogicalAxisRulesError,
            match=r"Conflicting logical axis rules for 'embed' at \"params/Dense_0/kernel\"",
        ):
            jax.jit(core_scope.apply(model))(variables, x)
    with jax.set_mesh(_mesh()):  # Flax's fallback outside strict mode
        y = jax.jit(core_scope.apply(model))(variables, x)
    np.testing.assert_array_equal(y, np.full((2, 3), 4.0))
