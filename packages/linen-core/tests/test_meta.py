import warnings

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

from linen.core import meta
from linen.core.errors import LinenError, PartitioningUnspecifiedError


def _boxed():
    return meta.Partitioned(jnp.arange(6.0).reshape(2, 3), ('data', None))


def test_partitioned_is_a_pytree_with_names_as_static_metadata():
    box = _boxed()
    leaves, treedef = jax.tree_util.tree_flatten(box)
    assert len(leaves) == 1 and leaves[0].shape == (2, 3)
    doubled = jax.tree_util.tree_map(lambda x: x * 2, box)
    assert isinstance(doubled, meta.Partitioned) and doubled.names == ('data', None)
    assert doubled.value.tolist() == [[0, 2, 4], [6, 8, 10]]
    assert meta.Partitioned(1, ['a', ['b', 'c']]).names == ('a', ('b', 'c'))


def test_partition_spec_and_tree_helpers():
    box = _boxed()
    assert box.get_partition_spec() == P('data', None)
    specs = meta.get_partition_spec({'p': box, 'x': jnp.ones(2), 'i': 3})
    assert specs == {'p': P('data', None), 'x': P(), 'i': None}
    assert meta.unbox({'p': box, 'i': 3})['p'].tolist() == box.value.tolist()
    replaced = meta.replace_boxed({'p': box, 'i': 3}, {'p': jnp.zeros((2, 3)), 'i': 4})
    assert isinstance(replaced['p'], meta.Partitioned) and replaced['i'] == 4
    assert replaced['p'].names == ('data', None) and float(replaced['p'].value.sum()) == 0.0
    assert meta.is_axis_metadata(box) and not meta.is_axis_metadata(box.value)


def test_with_partitioning_wraps_initializer():
    init = meta.with_partitioning(lambda key, shape: jax.random.normal(key, shape), ('a', 'b'))
    box = init(jax.random.key(0), (2, 2))
    assert isinstance(box, meta.Partitioned) and box.names == ('a', 'b')
    assert box.value.tolist() == jax.random.normal(jax.random.key(0), (2, 2)).tolist()


def test_add_and_remove_axis():
    box = _boxed()
    params = {meta.PARTITION_NAME: 'layers'}
    assert meta.PARTITION_NAME == 'partition_name'
    assert box.add_axis(0, params).names == ('layers', 'data', None)
    assert box.add_axis(1, params).names == ('data', 'layers', None)
    assert box.add_axis(4, params).names == ('data', None, None, None, 'layers')
    assert box.add_axis(1, params).remove_axis(1, params).names == ('data', None)
    tree = meta.add_axis({'p': box, 'x': 1}, 0, params)
    assert tree['p'].names == ('layers', 'data', None) and tree['x'] == 1
    assert meta.remove_axis(tree, 0, params)['p'].names == ('data', None)


def test_add_axis_without_partition_name_raises():
    with pytest.raises(PartitioningUnspecifiedError, match='metadata_params'):
        _boxed().add_axis(0, {})
    with pytest.raises(PartitioningUnspecifiedError, match='PARTITION_NAME'):
        _boxed().remove_axis(0, None)


def test_remove_wrong_axis_raises():
    with pytest.raises(
        LinenError, match="Cannot remove axis 0 named 'layers'.*that axis is 'data'"
    ):
        _boxed().remove_axis(0, {meta.PARTITION_NAME: 'layers'})


def test_vmap_over_boxed_values_keeps_metadata():
    stacked = meta.Partitioned(jnp.ones((4, 2, 3)), ('layers', 'data', None))
    out = jax.vmap(lambda b: jax.tree_util.tree_map(lambda v: v + 1, b))(stacked)
    assert out.names == ('layers', 'data', None) and out.value.shape == (4, 2, 3)


def test_unbox_without_mesh_returns_value_and_get_sharding_needs_a_mesh():
    box = _boxed()
    assert box.unbox() is box.value
    with pytest.raises(ValueError, match='has no mesh'):
        box.get_sharding()


def test_sharding_on_a_single_device_mesh():
    mesh = jax.sharding.Mesh(jax.devices()[:1], ('data',))
    box = meta.Partitioned(jnp.ones((2, 3)), ('data', None), mesh=mesh)
    sharding = box.get_sharding()
    assert sharding.mesh == mesh and sharding.spec == P('data', None)
    shardings = meta.get_sharding({'p': _boxed(), 'x': jnp.ones(2)}, mesh)
    assert shardings['p'].spec == P('data', None) and shardings['x'].spec == P()
    assert jax.jit(lambda b: b.unbox())(box).tolist() == box.value.tolist()


def test_abstract_base_cannot_be_instantiated():
    with pytest.raises(TypeError):
        meta.AxisMetadata()


def _auto_mesh_2x2():
    return jax.make_mesh((2, 2), ('data', 'model'), axis_types=(jax.sharding.AxisType.Auto,) * 2)


def test_global_mesh_outside_any_context_is_none():
    assert meta.get_global_mesh() is None and not meta.global_mesh_defined()
    assert meta.legacy_physical_mesh() is None


def test_global_mesh_under_set_mesh():
    mesh = _auto_mesh_2x2()  # 4 host devices, set by the root conftest
    with jax.set_mesh(mesh):
        assert meta.global_mesh_defined() and meta.get_global_mesh() == mesh.abstract_mesh
        # Inside jit only the abstract mesh exists; it is what get_global_mesh gives.
        seen = []
        jax.jit(lambda: seen.append(meta.get_global_mesh().axis_names))()
        assert seen == [('data', 'model')]
    assert not meta.global_mesh_defined()


def test_global_mesh_under_legacy_with_mesh():
    mesh = _auto_mesh_2x2()
    # Newer JAX deprecates `with mesh:` (0.10.0 does not warn); linen still honours it.
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', '.*set_mesh', DeprecationWarning)
        with mesh:
            assert meta.legacy_physical_mesh() is mesh
            assert meta.global_mesh_defined() and meta.get_global_mesh() is mesh
    assert meta.get_global_mesh() is None


def test_meta_imports_no_private_jax():
    import inspect

    assert 'jax._src' not in inspect.getsource(meta)
