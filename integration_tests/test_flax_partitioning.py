"""Flax as oracle for the legacy partitioning API (``nn.partitioning``): the same model
code, run with ``linen.nn`` and with ``flax.linen``, gives the same variables, the
same ``*_axes`` metadata, the same logical specs and the same shardings.

Meshes here use the suite's 4 host devices (2x2 and 1x4).
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import linen.nn as linen_nn
from linen.core import spmd
from linen.nn import partitioning as linen_partitioning

pytestmark = pytest.mark.flax
flax = pytest.importorskip('flax')
flax_nn = pytest.importorskip('flax.linen')
flax_partitioning = pytest.importorskip('flax.linen.partitioning')


RULES = (('batch', 'data'), ('embed', 'model'), ('mlp', 'model'), ('layers', None))


def models(nn, part):

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            w = part.param_with_axes(
                'kernel', nn.initializers.lecun_normal(), (x.shape[-1], 6), axes=('embed', 'mlp')
            )
            b = part.param_with_axes('bias', nn.initializers.zeros, (6,), axes=('mlp',))
            count = part.variable_with_axes('stats', 'count', jnp.zeros, (6,), axes=('mlp',))
            y = x @ w + b.reshape((1, 6))
            if self.is_mutable_collection('stats'):
                count.value = count.value + 1.0
            return part.with_sharding_constraint(y, ('batch', 'mlp'))

    class Layer(nn.Module):
        @nn.compact
        def __call__(self, c, _):
            w = part.param_with_axes(
                'w',
                nn.initializers.lecun_normal(),
                (c.shape[-1], c.shape[-1]),
                axes=('embed', 'mlp'),
            )
            return jnp.tanh(c @ w), None

    class Stack(nn.Module):
        @nn.compact
        def __call__(self, x):
            scanned = part.scan_with_axes(
                Layer,
                variable_axes={'params': 0},
                split_rngs={'params': True},
                length=3,
                axis_name='layers',
            )
            y, _ = scanned(name='scan')(x, None)
            return y

    class Heads(nn.Module):
        @nn.compact
        def __call__(self, x):
            vmapped = part.vmap_with_axes(
                Block,
                # Collections missing from variable_axes: Flax drops them inside vmap, linen
                # broadcasts them; naming stats_axes keeps the two comparable.
                variable_axes={'params': 1, 'stats': 0, 'stats_axes': None},
                split_rngs={'params': True},
                in_axes=None,
                out_axes=0,
                axis_size=2,
                partitioning_axis_names={'params': 'heads'},
            )
            return vmapped(name='heads')(x)

    return {'Block': Block, 'Stack': Stack, 'Heads': Heads}


LINEN = models(linen_nn, linen_partitioning)
FLAX = models(flax_nn, flax_partitioning)


def _as_plain(tree):
    """Variables as nested dicts with AxisMetadata replaced by its names, for comparison."""
    if isinstance(tree, dict) or hasattr(tree, 'items'):
        return {k: _as_plain(v) for k, v in tree.items()}
    if hasattr(tree, 'names'):
        return ('AxisMetadata', tree.names)
    return np.asarray(tree)


def _assert_same(ours, theirs):
    ours, theirs = _as_plain(ours), _as_plain(theirs)
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
    for a, b in zip(
        jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs), strict=True
    ):
        if isinstance(a, np.ndarray):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        else:
            assert a == b


def _np(tree):
    if isinstance(tree, tuple):
        return tuple(_np(t) for t in tree)
    return _as_plain(tree)


def _assert_same_tree(ours, theirs):
    """Bit for bit: tuples of plain trees (see ``_as_plain``)."""
    for a, b in zip(ours, theirs, strict=True):
        assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
            if isinstance(x, np.ndarray):
                np.testing.assert_array_equal(x, y)
            else:
                assert x == y


@pytest.mark.parametrize('name', ['Block', 'Stack', 'Heads'])
def test_same_variables_and_axes_metadata_as_flax(name):
    x = jnp.linspace(-1.0, 1.0, 8).reshape(2, 4)
    if name != 'Block':
        x = jnp.linspace(-1.0, 1.0, 8).reshape(2, 4)
    ours = LINEN[name]().init(jax.random.key(0), x)
    theirs = FLAX[name]().init(jax.random.key(0), x)
    _assert_same(ours, theirs)
    for col in ('params_axes', 'stats_axes'):
        if col in theirs:
            assert dict(linen_partitioning.get_axis_names(ours[col])) == dict(
                flax_partitioning.get_axis_names(theirs[col])
            )
    y_ours, _ = LINEN[name]().apply(ours, x, mutable=['stats'])
    y_theirs, _ = FLAX[name]().apply(theirs, x, mutable=['stats'])
    np.testing.assert_allclose(y_ours, y_theirs, rtol=1e-6, atol=1e-6)


def test_scan_and_vmap_add_the_stacked_axis_like_flax():
    x = jnp.ones((2, 4))
    stack = linen_partitioning.get_axis_names(
        LINEN['Stack']().init(jax.random.key(1), x)['params_axes']
    )
    assert stack['scan']['w'] == P('layers', 'embed', 'mlp')
    heads = LINEN['Heads']().init(jax.random.key(1), x)
    names = linen_partitioning.get_axis_names(heads['params_axes'])
    assert names['heads']['kernel'] == P('embed', 'heads', 'mlp')
    assert names['heads']['bias'] == P('mlp', 'heads')


@pytest.mark.parametrize(
    'names',
    [('batch', 'embed'), ('embed', 'mlp'), ('mlp', 'batch', None), (None,), ('layers', 'mlp'), ()],
)
def test_logical_to_mesh_axes_matches_flax(names):
    assert linen_partitioning.logical_to_mesh_axes(names, RULES) == (
        flax_partitioning.logical_to_mesh_axes(names, RULES)
    )


def test_duplicate_dimension_names_raise_value_error_like_flax():
    with pytest.raises(ValueError, match='more than once'):
        flax_partitioning.logical_to_mesh_axes(('embed', 'embed'), RULES)
    with pytest.raises(ValueError, match=r"Dimensions \('embed',\) occur more than once"):
        linen_partitioning.logical_to_mesh_axes(('embed', 'embed'), RULES)


def test_axis_rules_context_matches_flax():
    with linen_partitioning.axis_rules(RULES), flax_partitioning.axis_rules(RULES):
        assert tuple(linen_partitioning.get_axis_rules()) == tuple(
            flax_partitioning.get_axis_rules()
        )
        assert linen_partitioning.logical_to_mesh_axes(('mlp',)) == P('model')
    assert linen_partitioning.get_axis_rules() == ()


@pytest.mark.parametrize('shape', [(2, 2), (1, 4)])
def test_with_sharding_constraint_and_fallbacks_match_flax(shape):
    mesh = jax.make_mesh(shape, ('data', 'model'), axis_types=(AxisType.Auto,) * 2)
    x = jnp.arange(16.0).reshape(4, 4)

    def run(part, fallback, names):
        f = jax.jit(
            lambda v: part.with_sharding_constraint(
                v * 2, names, rules=RULES, mesh=mesh, fallback=getattr(part.RulesFallback, fallback)
            )
        )
        return f(x)

    for names in [('batch', 'mlp'), ('mlp', 'batch')]:
        for fallback in ('AXIS_IS_UNSHARDED', 'NO_CONSTRAINT'):
            ours = run(linen_partitioning, fallback, names)
            theirs = run(flax_partitioning, fallback, names)
            np.testing.assert_array_equal(ours, theirs)
            assert ours.sharding.is_equivalent_to(theirs.sharding, 2)
    ours = run(linen_partitioning, 'AXIS_IS_UNSHARDED', ('batch', 'mlp'))
    assert ours.sharding.is_equivalent_to(NamedSharding(mesh, P('data', 'model')), 2)
    with pytest.raises(ValueError, match='did not match a rule'):
        run(flax_partitioning, 'RAISE_ERROR', ('batch', 'length'))
    with pytest.raises(ValueError, match='did not match a rule'):
        run(linen_partitioning, 'RAISE_ERROR', ('batch', 'length'))


def test_param_with_axes_more_names_than_dimensions_names_the_path():
    class Bad(linen_nn.Module):
        @linen_nn.compact
        def __call__(self, x):
            return linen_partitioning.param_with_axes(
                'kernel', linen_nn.initializers.zeros, (4, 3), axes=('embed', 'mlp', 'heads')
            )

    with pytest.raises(ValueError, match=r'"layers_0/kernel".*\(4, 3\)'):
        linen_nn.Sequential([Bad()]).init(jax.random.key(0), jnp.ones((1, 4)))


def _fewer_names(nn, part, axes):
    class Layer(nn.Module):
        @nn.compact
        def __call__(self, x):
            w = part.param_with_axes('w', nn.initializers.lecun_normal(), (4, 3), axes=axes)
            c = part.variable_with_axes('cache', 'c', jnp.ones, (4, 3), axes=axes)
            return x @ (w * c.value)

    return Layer()


@pytest.mark.parametrize('axes', [(), ('embed',)])
def test_param_with_axes_fewer_names_than_dimensions_accepted_as_flax(axes):
    # A PartitionSpec prefix: the trailing dimensions are replicated; `()` keeps empty metadata.
    def run(nn, part):
        model = _fewer_names(nn, part, axes)
        variables = model.init(jax.random.key(0), jnp.ones((2, 4)))
        return _np(variables), np.asarray(model.apply(variables, jnp.ones((2, 4))))

    ours = run(linen_nn, linen_partitioning)
    theirs = run(flax_nn, flax_partitioning)
    assert ours[0]['params_axes']['w_axes'] == ('AxisMetadata', axes)
    assert ours[0]['cache_axes']['c_axes'] == ('AxisMetadata', axes)
    _assert_same_tree(ours, theirs)


def test_param_with_axes_fewer_names_under_rules_and_mesh_shards_as_flax():
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Auto,) * 2)

    def run(nn, part, axes):
        model = _fewer_names(nn, part, axes)
        with jax.set_mesh(mesh), part.axis_rules(RULES):
            variables = jax.jit(model.init)(jax.random.key(0), jnp.ones((2, 4)))
        return variables['params']['w']

    for axes in [(), ('embed',)]:
        ours = run(linen_nn, linen_partitioning, axes)
        theirs = run(flax_nn, flax_partitioning, axes)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
        assert ours.sharding.is_equivalent_to(theirs.sharding, 2)


# ------------------------------------------------------------------ partitioning.remat


def _remat_model(nn, part, **remat_kw):
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, train):
            # `train` must arrive as a Python bool: static_argnums=(1,) marks it, counted
            # without `self` (nn.remat would need (2,)).
            y = nn.Dense(4)(x)
            return nn.Dropout(0.5, deterministic=not train)(y) if train else jnp.tanh(y)

    Remat = part.remat(Block, static_argnums=(1,), **remat_kw)

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x, train):
            return Remat()(x, train) + Remat(name='named')(x, not train)

    return Top(), Remat


@pytest.mark.parametrize('kw', [{}, {'prevent_cse': False}])
def test_partitioning_remat_counts_static_argnums_without_self_as_flax(kw):
    x = jnp.linspace(-1.0, 1.0, 8).reshape(2, 4)

    def run(nn, part):
        model, remat_cls = _remat_model(nn, part, **kw)
        rngs = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}
        variables = model.init(rngs, x, True)

        def loss(params, x):
            y = model.apply({'params': params}, x, True, rngs={'dropout': jax.random.key(2)})
            return jnp.sum(y**2)

        value, grads = jax.value_and_grad(loss, argnums=(0, 1))(variables['params'], x)
        return remat_cls.__name__, _np(variables), np.asarray(value), _np(grads)

    ours, theirs = run(linen_nn, linen_partitioning), run(flax_nn, flax_partitioning)
    assert ours[0] == theirs[0] == 'Core_remat_staticBlock'
    assert list(ours[1]['params']) == list(theirs[1]['params'])
    _assert_same_tree(ours[1:], theirs[1:])


def test_partitioning_remat_is_not_nn_remat():
    # nn.remat keeps Flax's nn meaning (`self` is 0): the same static_argnums=(1,) marks `x`.
    assert linen_partitioning.remat is not linen_nn.remat
    _, remat_cls = _remat_model(linen_nn, linen_partitioning)
    assert remat_cls.__qualname__ == 'Core_remat_staticBlock'
    assert linen_partitioning.core_remat_static.__name__ == 'core_remat_static'


def test_sow_twice_with_different_axes_raises():
    class Child(linen_nn.Module):
        @linen_nn.compact
        def __call__(self, x):
            axes = ('embed',) if x.ndim == 1 else ('mlp',)
            k = linen_partitioning.param_with_axes(
                'k', linen_nn.initializers.zeros, (4,), axes=axes
            )
            return x + k

    class Twice(linen_nn.Module):
        @linen_nn.compact
        def __call__(self, x):
            child = Child()
            return child(child(x).reshape(1, 4))

    with pytest.raises(ValueError, match=r"sown twice and differ: \('embed',\) then \('mlp',\)"):
        Twice().init(jax.random.key(0), jnp.ones(4))


def _dense_abstract(nn):
    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            init = nn.with_logical_partitioning(nn.initializers.ones, ('embed', 'mlp'))
            return nn.Dense(4, kernel_init=init)(x)

    return jax.eval_shape(M().init, jax.random.key(0), jnp.ones((2, 4)))


BAD_RULES = {
    'duplicate': (('embed', 'model'), ('embed', 'model'), ('mlp', None)),
    'conflict': (('embed', 'data'), ('embed', 'model'), ('mlp', 'data')),
    'one_mesh_axis': (('embed', 'model'), ('mlp', 'model')),
}


@pytest.mark.parametrize('case', list(BAD_RULES))
def test_questionable_rules_shard_as_flax_and_raise_with_the_path_in_strict_mode(case):
    rules = BAD_RULES[case]
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Auto,) * 2)

    def sharding(nn, **kw):
        specs = nn.get_partition_spec(_dense_abstract(nn))
        with nn.logical_axis_rules(rules, **kw):
            return nn.logical_to_mesh_sharding(specs, mesh, rules)['params']['Dense_0']['kernel']

    expected = sharding(flax_nn).spec
    assert sharding(linen_nn).spec == expected  # Flax's fallbacks, silent as in Flax
    with pytest.raises(spmd.LogicalAxisRulesError) as info:
        sharding(linen_nn, strict=True)
    assert '"params/Dense_0/kernel"' in str(info.value)
    assert ("'embed'" if case != 'one_mesh_axis' else "mesh axis 'model'") in str(info.value)


def test_missing_mesh_axis_raises_flax_error_first_then_the_path():
    rules = (('embed', None), ('mlp', 'tensor'))
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Auto,) * 2)
    errors = []
    for nn in (flax_nn, linen_nn):
        specs = nn.get_partition_spec(_dense_abstract(nn))
        with pytest.raises(ValueError) as info:
            nn.logical_to_mesh_sharding(specs, mesh, rules)
        errors.append(str(info.value))
    theirs, ours = errors
    assert ours.startswith(theirs.split('\n')[0]), (ours, theirs)
    assert '"params/Dense_0/kernel"' in ours and "logical axis 'mlp'" in ours


def test_missing_mesh_axis_in_with_partitioning_raises_flax_error_first_then_the_path():
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Auto,) * 2)

    def error(nn):
        class M(nn.Module):
            @nn.compact
            def __call__(self, x):
                init = nn.with_partitioning(nn.initializers.ones, (None, 'tensor'))
                return nn.Dense(4, kernel_init=init)(x)

        abstract = jax.eval_shape(M().init, jax.random.key(0), jnp.ones((2, 4)))
        with pytest.raises(ValueError) as info:
            nn.get_sharding(abstract, mesh)
        return str(info.value)

    errors = [error(flax_nn), error(linen_nn)]
    theirs, ours = errors
    assert ours.startswith(theirs.split('\n')[0]), (ours, theirs)
    assert '"params/Dense_0/kernel"' in ours and "'tensor'" in ours


# ------------------------------------------------------- pytree-valued param_with_axes


def _pytree_param(nn, part, axes):
    def init_fn(key, shape, dtype):
        del key
        return {'a': jnp.ones(shape, dtype), 'b': (jnp.zeros(shape, dtype), jnp.ones(shape, dtype))}

    class Tree(nn.Module):
        @nn.compact
        def __call__(self, x):
            tree = part.param_with_axes('tree', init_fn, (4, 4), x.dtype, axes=axes)
            return x @ tree['a'] @ tree['b'][0] @ tree['b'][1]

    return Tree()


PYTREE_AXES = {
    'nested names tuples': {'a': ('embed', 'mlp'), 'b': (('embed', 'mlp'), ('mlp', 'embed'))},
    'one names tuple per subtree': {'a': ('batch', None), 'b': ('mlp', 'embed')},
}


@pytest.mark.parametrize('case', sorted(PYTREE_AXES))
def test_pytree_param_with_axes_keeps_the_names_tree_as_flax(case):
    axes = PYTREE_AXES[case]
    x = jnp.ones((2, 4))
    with linen_partitioning.axis_rules(RULES):
        ours = _pytree_param(linen_nn, linen_partitioning, axes).init(jax.random.key(0), x)
    with flax_partitioning.axis_rules(RULES):
        theirs = _pytree_param(flax_nn, flax_partitioning, axes).init(jax.random.key(0), x)
    assert ours['params_axes']['tree_axes'].names == theirs['params_axes']['tree_axes'].names
    assert ours['params_axes']['tree_axes'] == linen_partitioning.AxisMetadata(names=axes)
    assert dict(linen_partitioning.get_axis_names(ours['params_axes'])) == dict(
        flax_partitioning.get_axis_names(theirs['params_axes'])
    )


def test_pytree_param_with_axes_under_rules_and_mesh_shards_as_flax():
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Auto,) * 2)
    axes = {'a': ('batch', 'mlp'), 'b': (('batch', None), (None, 'mlp'))}

    def run(nn, part):
        model = _pytree_param(nn, part, axes)
        with jax.set_mesh(mesh), part.axis_rules(RULES):
            variables = jax.jit(model.init)(jax.random.key(0), jnp.ones((2, 4)))
        return variables['params']['tree']

    ours, theirs = run(linen_nn, linen_partitioning), run(flax_nn, flax_partitioning)
    for a, b in zip(
        jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert a.sharding.is_equivalent_to(b.sharding, 2)

    def constraints(nn, part):
        model = _pytree_param(nn, part, axes)
        with jax.set_mesh(mesh), part.axis_rules(RULES):
            jaxpr = jax.make_jaxpr(model.init)(jax.random.key(0), jnp.ones((2, 4)))
        return re.findall(r'sharding_constraint\[[^\]]*?spec=(P\([^)]*\))', str(jaxpr))

    # Each array is constrained to its own names under the rules. (Flax 0.12 constrains
    # every array of such a tree to P(None, None): the names are not mapped per array.)
    ours = constraints(linen_nn, linen_partitioning)
    assert sorted(ours) == sorted(["P('data', 'model')", "P('data', None)", "P(None, 'model')"])


def _user_box_program(nn, struct, axis_metadata, initial):
    # A metadata box of the user's own, spelled as Flax documents it: a PyTreeNode
    # and an AxisMetadata, whose add/remove_axis reduce and broadcast under nn.vmap.
    # Its value has no mapped axis until remove_axis makes one (Flax's own tests keep
    # a scalar there): nn.vmap's axis check must read what remove_axis gives.
    class MeanBox(struct.PyTreeNode, axis_metadata):
        value: jax.Array

        def unbox(self):
            return self.value

        def replace_boxed(self, val):
            return self.replace(value=val)

        def add_axis(self, index, params):
            return self.replace(value=jnp.mean(self.value, axis=index))

        def remove_axis(self, index, params):
            shape = list(self.value.shape)
            shape.insert(index, params['axis_size'])
            return self.replace(value=jnp.broadcast_to(self.value, shape))

    class Inner(nn.Module):
        @nn.compact
        def __call__(self, x):
            v = self.variable('aux', 'v', lambda: MeanBox(initial))
            return x + v.value

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            mapped = nn.vmap(
                Inner,
                variable_axes={'aux': 0},
                metadata_params={'axis_size': x.shape[0]},
            )
            mapped = mapped(name='mapped')
            return mapped(mapped(x))

    x = jnp.ones((2, 3))
    variables = Outer().init(jax.random.key(0), x)
    out = Outer().apply(variables, x)
    box = variables['aux']['mapped']['v']
    return type(box).__name__, np.asarray(box.value), np.asarray(out)


@pytest.mark.parametrize('initial', [jnp.arange(3.0), jnp.ones(())], ids=['vector', 'scalar'])
def test_user_metadata_box_written_as_in_flax(initial):
    from flax import struct as flax_struct
    from flax.core import meta as flax_meta

    from linen.core import meta as linen_meta
    from linen.core import struct as linen_struct

    theirs = _user_box_program(flax_nn, flax_struct, flax_meta.AxisMetadata, initial)
    ours = _user_box_program(linen_nn, linen_struct, linen_meta.AxisMetadata, initial)
    assert ours[0] == theirs[0] == 'MeanBox'
    np.testing.assert_array_equal(ours[1], theirs[1])
    np.testing.assert_array_equal(ours[2], theirs[2])


# ------------------------------------------------------------------ nn.vmap(spmd_axis_name=...)


def _spmd_vmapped(nn, spmd):
    class Body(nn.Module):
        @nn.compact
        def __call__(self, x):
            init = nn.with_partitioning(nn.initializers.lecun_normal(), (None, 'model'))
            y = nn.Dense(4, kernel_init=init)(x)
            return jax.lax.with_sharding_constraint(y, P('model'))

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            vmapped = nn.vmap(
                Body,
                variable_axes={'params': 0},
                split_rngs={'params': True},
                metadata_params={nn.PARTITION_NAME: None},
                **spmd,
            )
            return vmapped(name='v')(x)

    return Top()


def _constraints(lowered_text):
    # The sharding each constraint asks for, by the mesh axes of each dimension.
    found = re.findall(r'sharding_constraint[^\n]*', lowered_text)
    return sorted(re.sub(r'%[\w#]+', '%', line) for line in found)


@pytest.mark.parametrize('spmd', [{}, {'spmd_axis_name': 'data'}, {'spmd_axis_name': ('data',)}])
def test_vmap_spmd_axis_name_shards_the_mapped_axis_as_flax(spmd):
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=(AxisType.Auto,) * 2)
    x = jnp.arange(24.0).reshape(2, 3, 4)

    def run(nn):
        model = _spmd_vmapped(nn, spmd)
        with jax.set_mesh(mesh):
            variables = jax.jit(model.init)(jax.random.key(0), x)
            apply = jax.jit(model.apply)
            text = apply.lower(variables, x).as_text()
            return nn.unbox(variables), apply(variables, x), _constraints(text)

    ours, theirs = run(linen_nn), run(flax_nn)
    _assert_same_tree(ours[0], theirs[0])
    np.testing.assert_array_equal(np.asarray(ours[1]), np.asarray(theirs[1]))
    assert ours[2] and ours[2] == theirs[2]
    # With the name, the mapped axis is sharded over 'data' in the body's constraint.
    assert any('data' in line for line in ours[2]) == bool(spmd), ours[2]
