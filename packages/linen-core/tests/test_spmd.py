import os
import subprocess
import sys
import textwrap
import threading
import warnings

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

from linen.core import meta, spmd

RULES = (
    ('batch', 'data'),
    ('embed', 'model'),
    ('mlp', 'model'),
    ('heads', ('data', 'model')),
    ('kv', None),
    ('seq', 'data'),
    ('seq', 'model'),
)


@pytest.mark.parametrize(
    'names, expected',
    [
        (('batch', 'embed'), P('data', 'model')),
        (('embed', 'mlp'), P('model', None)),  # 'model' is taken by embed
        (('batch', 'seq'), P('data', 'model')),  # seq falls through to its second rule
        (('seq', 'batch'), P('model', 'data')),  # rule order, not dimension order, wins
        (('heads',), P(('data', 'model'))),
        (('kv', 'batch'), P(None, 'data')),
        (('batch', 'seq', 'embed'), P('data', None, 'model')),
        ((None, 'batch'), P(None, 'data')),
        (('batch', P.UNCONSTRAINED), P('data', P.UNCONSTRAINED)),
    ],
)
def test_logical_to_mesh_axes(names, expected):
    assert spmd.logical_to_mesh_axes(names, RULES) == expected


def test_unmapped_name_is_replicated_silently_as_in_flax():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert spmd.logical_to_mesh_axes(('unknown',), RULES) == P(None)


def test_none_names_give_none():
    assert spmd.logical_to_mesh_axes(None, RULES) is None


def test_context_manager_sets_and_restores_rules():
    assert spmd.get_logical_axis_rules() == ()
    with spmd.logical_axis_rules(RULES):
        assert spmd.get_logical_axis_rules() == RULES
        assert spmd.logical_to_mesh_axes(('batch',)) == P('data')
        with spmd.logical_axis_rules([('batch', ['x', 'y'])]):
            assert spmd.logical_to_mesh_axes(('batch',)) == P(('x', 'y'))
        assert spmd.get_logical_axis_rules() == RULES
    assert spmd.get_logical_axis_rules() == ()


def test_rules_are_context_local():
    seen = {}

    def worker():
        seen['before'] = spmd.get_logical_axis_rules()
        spmd.set_logical_axis_rules([('batch', 'other')])
        seen['after'] = spmd.get_logical_axis_rules()

    with spmd.logical_axis_rules(RULES):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert spmd.get_logical_axis_rules() == RULES
    assert seen == {'before': (), 'after': (('batch', 'other'),)}


def test_logical_to_mesh_on_trees():
    tree = {'a': P('batch', 'embed'), 'b': None, 'c': {'d': P('mlp')}}
    assert spmd.logical_to_mesh(tree, RULES) == {
        'a': P('data', 'model'),
        'b': None,
        'c': {'d': P('model')},
    }
    mesh = jax.sharding.Mesh(jax.devices()[:1], ('data',))
    sh = spmd.logical_to_mesh_sharding({'a': P('batch', 'kv')}, mesh, RULES)
    assert sh['a'].spec == P('data', None) and sh['a'].mesh == mesh


def test_logically_partitioned():
    init = spmd.with_logical_partitioning(jnp.zeros, ('batch', 'embed'), rules=RULES)
    box = init((2, 4))
    assert isinstance(box, spmd.LogicallyPartitioned) and isinstance(box, meta.Partitioned)
    assert box.get_partition_spec() == P('batch', 'embed')  # logical, as in Flax
    assert box.get_mesh_partition_spec() == P('data', 'model')
    assert box.unbox().shape == (2, 4)
    assert box.add_axis(0, {meta.PARTITION_NAME: 'layers'}).names == ('layers', 'batch', 'embed')
    # Rules from the context apply when the box has none.
    with spmd.logical_axis_rules(RULES):
        assert spmd.LogicallyPartitioned(1, ('mlp',)).get_mesh_partition_spec() == P('model')


def test_with_logical_constraint_without_rules_or_mesh_is_identity():
    x = jnp.ones(3)
    assert spmd.with_logical_constraint(x, ('batch',)) is x  # no rules: silent, as Flax
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # rules without a mesh: a silent no-op, as Flax
        assert spmd.with_logical_constraint(x, ('batch',), RULES) is x


_MULTI_DEVICE = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    from jax.sharding import Mesh, PartitionSpec as P
    from linen.core import meta, spmd
    import numpy as np

    assert jax.device_count() == 8, jax.devices()
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ('data', 'model'))
    init = meta.with_partitioning(lambda k: jax.random.normal(k, (8, 6)), ('data', 'model'))
    boxed = jax.eval_shape(lambda k: {'w': init(k)}, jax.random.key(0))
    shardings = meta.get_sharding(boxed, mesh)
    params = jax.jit(lambda k: meta.unbox({'w': init(k)}), out_shardings=shardings)(
        jax.random.key(0)
    )['w']
    assert params.sharding.spec == P('data', 'model'), params.sharding
    assert {s.data.shape for s in params.addressable_shards} == {(2, 3)}
    np.testing.assert_array_equal(params, jax.random.normal(jax.random.key(0), (8, 6)))

    rules = (('batch', 'data'), ('embed', 'model'))
    linit = spmd.with_logical_partitioning(jnp.ones, ('embed', 'batch'), rules=rules)
    lboxed = jax.eval_shape(lambda: linit((4, 8)))
    sh = lboxed.get_sharding(mesh)
    assert sh.spec == P('model', 'data'), sh
    out = jax.jit(lambda: linit((4, 8)).unbox(), out_shardings=sh)()
    assert {s.data.shape for s in out.addressable_shards} == {(2, 2)}

    # Inside jit under a context mesh, unbox and with_logical_constraint constrain.
    def f(x):
        y = spmd.with_logical_constraint(x * 2, P('batch', 'embed'), rules=rules, mesh=mesh)
        return y
    y = jax.jit(f)(jnp.ones((8, 6)))
    assert y.sharding.spec == P('data', 'model'), y.sharding
    print('OK')
    """
)


@pytest.mark.slow
def test_multi_device_sharding_in_subprocess():
    env = dict(
        os.environ, XLA_FLAGS='--xla_force_host_platform_device_count=8', JAX_PLATFORMS='cpu'
    )
    proc = subprocess.run(
        [sys.executable, '-c', _MULTI_DEVICE], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith('OK')
