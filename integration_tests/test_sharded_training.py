"""Training across devices and processes on JAX's own SPMD engine.

Meshes use the suite's 4 simulated host devices (2x2, 4x1, 1x4); the multi-process
test runs 2 processes x 2 CPU devices on localhost, and the 8-device test runs a
transformer block on a 2x4 mesh in one subprocess (the device count is fixed when
JAX starts). Every sharded result is compared with the same computation on one
device.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import optax
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import linen.nn as nn

sys.path.insert(0, str(Path(__file__).parent / 'fixtures'))
import sharded_8dev_checks as eight
import sharded_dp_worker as worker

WORKER = Path(worker.__file__)

# (mesh shape, logical rules, the collective the compiled step must hold)
LAYOUTS = {
    # data parallel: batch split, parameters replicated, gradients all-reduced
    'dp': ((4, 1), (('batch', 'data'), ('embed', None), ('mlp', None)), 'all-reduce'),
    # tensor parallel: the hidden (mlp) dimension of both kernels split over 'model'
    'tp': ((1, 4), (('batch', 'data'), ('embed', None), ('mlp', 'model')), 'all-reduce'),
    # fully sharded: parameters split over the data axis too, gathered to compute
    'fsdp': ((4, 1), (('batch', 'data'), ('embed', None), ('mlp', 'data')), 'all-gather'),
}


def _mesh(shape):
    return jax.make_mesh(shape, ('data', 'model'), axis_types=(AxisType.Auto,) * 2)


def _sharded_init(model, x, mesh, rules):
    abstract = jax.eval_shape(lambda k: model.init(k, x)['params'], jax.random.key(0))
    shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, rules)
    params = jax.jit(lambda k: model.init(k, x)['params'], out_shardings=shardings)(
        jax.random.key(0)
    )
    return params, shardings


def test_init_directly_into_shardings():
    mesh, rules, _ = (_mesh((2, 2)), LAYOUTS['tp'][1], None)
    x, _ = worker.data()
    with nn.logical_axis_rules(rules):
        params, _ = _sharded_init(worker.MLPBlock(), x, mesh, rules)
    first = params['Dense_0']['kernel']
    assert isinstance(first, nn.LogicallyPartitioned) and first.names == ('embed', 'mlp')
    assert first.value.sharding.is_equivalent_to(NamedSharding(mesh, P(None, 'model')), 2)
    second = params['Dense_1']['kernel'].value
    assert second.sharding.is_equivalent_to(NamedSharding(mesh, P('model', None)), 2)
    assert {s.data.shape for s in second.addressable_shards} == {(4, 4)}
    expected = worker.MLPBlock().init(jax.random.key(0), x)['params']['Dense_1']['kernel'].value
    np.testing.assert_array_equal(second, expected)


@pytest.mark.parametrize('layout', list(LAYOUTS))
def test_train_step_matches_single_device(layout):
    shape, rules, collective = LAYOUTS[layout]
    mesh = _mesh(shape)
    model, tx = worker.MLPBlock(), optax.adam(1e-2)
    x, y = worker.data()
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        params, shardings = _sharded_init(model, x, mesh, rules)
        opt_state = tx.init(params)
        batch = NamedSharding(mesh, P('data'))
        xs, ys = jax.device_put(x, batch), jax.device_put(y, batch)
        step = jax.jit(worker.make_step(model, tx))
        hlo = step.lower(params, opt_state, xs, ys).compile().as_text()
        for _ in range(worker.STEPS):
            params, opt_state, _ = step(params, opt_state, xs, ys)
    assert collective in hlo, f'{layout}: no {collective} in the compiled step'
    # The parameters keep their layout through the optimizer update.
    kernel = params['Dense_0']['kernel']
    assert kernel.names == ('embed', 'mlp')
    assert kernel.value.sharding.is_equivalent_to(shardings['Dense_0']['kernel'], 2)
    expected = worker.train_single_device()
    ours = nn.unbox(params)
    for (path, a), b in zip(
        jax.tree_util.tree_leaves_with_path(ours), jax.tree_util.tree_leaves(expected), strict=True
    ):
        # float32 tolerance for Adam steps: the sharded program sums the gradients in
        # another order, and Adam divides each gradient by its own scale, so for a
        # near-cancelling sum (a bias's gradient) the terms' rounding (~1e-7 of the
        # terms) becomes up to lr * 1e-4 per step in the update (measured 3.3e-6
        # after the steps on jax 0.10.0): absolute 1e-5, relative as before.
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-5, err_msg=jax.tree_util.keystr(path))


def test_single_device_step_has_no_collectives():
    model, tx = worker.MLPBlock(), optax.adam(1e-2)
    x, y = worker.data()
    params = nn.unbox(model.init(jax.random.key(0), x)['params'])
    hlo = jax.jit(worker.make_step(model, tx)).lower(params, tx.init(params), x, y)
    text = hlo.compile().as_text()
    assert 'all-reduce' not in text and 'all-gather' not in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('localhost', 0))
        return s.getsockname()[1]


def test_data_parallel_step_across_two_processes(tmp_path):
    out = tmp_path / 'params.npz'
    # Two devices per process, every other XLA flag as in this process (the expected
    # parameters below are computed here, so both sides compile alike).
    flags = [
        f
        for f in os.environ.get('XLA_FLAGS', '').split()
        if not f.startswith('--xla_force_host_platform_device_count')
    ]
    env = dict(os.environ, XLA_FLAGS=' '.join([*flags, '--xla_force_host_platform_device_count=2']))
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(i), port, str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    logs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], '\n'.join(log[-3000:] for log in logs)
    saved = dict(np.load(out))
    expected = {
        jax.tree_util.keystr(k): np.asarray(v)
        for k, v in jax.tree_util.tree_leaves_with_path(worker.train_single_device())
    }
    assert saved.keys() == expected.keys()
    for key in expected:
        # The same float32 Adam tolerance as above: across processes the gradients
        # are summed in another order too.
        np.testing.assert_allclose(saved[key], expected[key], rtol=2e-5, atol=1e-5, err_msg=key)


def _restore_target(abstract, mesh, rules):
    """Abstract boxed variables whose values carry the shardings of ``mesh``."""
    shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, rules)

    def one(a, s):
        if isinstance(a, nn.Partitioned):
            return a.replace_boxed(jax.ShapeDtypeStruct(a.value.shape, a.value.dtype, sharding=s))
        return jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s)

    is_box = lambda a: isinstance(a, nn.Partitioned)
    return jax.tree_util.tree_map(one, abstract, shardings, is_leaf=is_box), shardings


def test_checkpoint_restores_onto_other_meshes_with_metadata(tmp_path, request):
    ocp = pytest.importorskip('orbax.checkpoint')
    rules = (('batch', 'data'), ('embed', 'model'), ('mlp', 'data'))
    x, _ = worker.data()
    model = worker.MLPBlock()
    abstract = jax.eval_shape(lambda k: model.init(k, x)['params'], jax.random.key(0))
    params, _ = _sharded_init(model, x, _mesh((2, 2)), rules)
    reference = nn.unbox(model.init(jax.random.key(0), x)['params'])
    checkpointer = ocp.StandardCheckpointer()
    request.addfinalizer(checkpointer.close)  # joins orbax's background threads
    checkpointer.save(tmp_path / 'step_0', params)
    checkpointer.wait_until_finished()

    # 2x2 -> 4x1, saved again, -> one device.
    target, shardings = _restore_target(abstract, _mesh((4, 1)), rules)
    on_4x1 = checkpointer.restore(tmp_path / 'step_0', target)
    kernel = on_4x1['Dense_0']['kernel']
    assert isinstance(kernel, nn.LogicallyPartitioned) and kernel.names == ('embed', 'mlp')
    assert kernel.value.sharding.is_equivalent_to(shardings['Dense_0']['kernel'], 2)
    checkpointer.save(tmp_path / 'step_1', on_4x1)
    checkpointer.wait_until_finished()
    one = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ('data', 'model'))
    target, _ = _restore_target(abstract, one, rules)
    on_one = checkpointer.restore(tmp_path / 'step_1', target)
    assert on_one['Dense_1']['kernel'].names == ('mlp', 'embed')
    assert len(on_one['Dense_1']['kernel'].value.sharding.device_set) == 1
    for a, b in zip(
        jax.tree_util.tree_leaves(nn.unbox(on_one)),
        jax.tree_util.tree_leaves(reference),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)


# Per parameter of the 8-device block, the mesh spec each layout must place it on.
EIGHT_DEVICE_SPECS = {
    'dp': {},  # everything replicated
    'tp': {
        **{f'attn/{n}/kernel': [None, 'model', None] for n in ('query', 'key', 'value')},
        'attn/out/kernel': ['model', None, None],
        'mlp_in/kernel': [None, 'model'],
        'mlp_out/kernel': ['model', None],
    },
    'fsdp': {
        **{f'attn/{n}/kernel': [['data', 'model'], None, None] for n in ('query', 'key', 'value')},
        'attn/out/kernel': [None, None, ['data', 'model']],
        'mlp_in/kernel': [['data', 'model'], None],
        'mlp_out/kernel': [None, ['data', 'model']],
    },
}
EIGHT_DEVICE_SPECS['tp_explicit'] = EIGHT_DEVICE_SPECS['tp']
EIGHT_DEVICE_COLLECTIVES = {
    'dp': 'all-reduce',
    'tp': 'all-reduce',
    'fsdp': 'all-gather',
    'tp_explicit': 'all-reduce',
}


def test_transformer_block_on_eight_devices(tmp_path):
    """DP, TP, FSDP (and TP on explicit axes) on a 2x4 mesh, in one 8-device process."""
    # Unoptimised XLA code halves the compile time; the HLO keeps its collectives.
    flags = (
        '--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0 '
        '--xla_llvm_disable_expensive_passes=true'
    )
    env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS='cpu')
    proc = subprocess.Popen(
        [sys.executable, '-W', 'error', eight.__file__, str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    expected = eight.train_single_device()  # meanwhile, here on one device
    log = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, log[-4000:]
    report = json.loads((tmp_path / 'report.json').read_text())
    trained = dict(np.load(tmp_path / 'params.npz'))
    assert set(report) == set(EIGHT_DEVICE_SPECS)
    for layout, specs in EIGHT_DEVICE_SPECS.items():
        placed = report[layout]['initial']
        assert set(placed) == set(expected), layout
        for path, value in expected.items():
            spec = specs.get(path, [None] * value.ndim)
            assert placed[path]['spec'] == spec, (layout, path)
            # Each device holds only its shard from the start.
            factor = [
                1 if e is None else np.prod([eight.MESH_SIZES[a] for a in np.atleast_1d(e)])
                for e in spec
            ]
            assert placed[path]['shard_shape'] == [d // f for d, f in zip(value.shape, factor)]
            np.testing.assert_allclose(
                trained[f'{layout}/{path}'],
                value,
                rtol=2e-5,
                atol=2e-6,
                err_msg=f'{layout}: {path}',
            )
        assert EIGHT_DEVICE_COLLECTIVES[layout] in report[layout]['collectives'], layout
        assert report[layout]['names_after_training'] == ['embed', 'mlp']


def test_checkpoint_onto_a_target_of_another_shape_names_the_path(tmp_path, request):
    ocp = pytest.importorskip('orbax.checkpoint')
    from linen.core import serialization
    from linen.core.errors import InvalidCheckpointError

    x, _ = worker.data()
    params = nn.unbox(worker.MLPBlock().init(jax.random.key(0), x)['params'])
    boxed = worker.MLPBlock().init(jax.random.key(0), x)['params']
    checkpointer = ocp.StandardCheckpointer()
    request.addfinalizer(checkpointer.close)
    checkpointer.save(tmp_path / 'step_0', boxed)
    checkpointer.wait_until_finished()
    # A target with a wider hidden layer: orbax's own error names no variable.
    wider = jax.eval_shape(lambda: boxed)
    wider['Dense_0']['kernel'] = wider['Dense_0']['kernel'].replace_boxed(
        jax.ShapeDtypeStruct((worker.FEATURES, 2 * worker.HIDDEN), np.float32)
    )
    stored = checkpointer.metadata(tmp_path / 'step_0')
    with pytest.raises(
        InvalidCheckpointError,
        match=r'Dense_0/kernel/value: the checkpoint holds \(4, 8\), the target expects \(4, 16\)',
    ):
        serialization.check_restore_shapes(wider, stored)
    # The right target passes the check and restores, boxes intact.
    same = jax.eval_shape(lambda: boxed)
    serialization.check_restore_shapes(same, stored)
    restored = checkpointer.restore(tmp_path / 'step_0', same)
    assert restored['Dense_0']['kernel'].names == ('embed', 'mlp')
    np.testing.assert_array_equal(
        nn.unbox(restored)['Dense_1']['kernel'], params['Dense_1']['kernel']
    )
