"""``tabulate(show_sharding=True)``: logical axes, mesh spec, bytes per device, replication.

On the 4 host devices the root conftest provides, as a 2 x 2 ('data', 'model') mesh.
"""

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

nn = pytest.importorskip('linen.nn')

from linen.profiling import tabulate  # noqa: E402
from linen.profiling.errors import ReplicatedParametersWarning  # noqa: E402

PLAIN = {'width': 300, 'force_terminal': False}
D_IN, D_HID, D_OUT = 6, 8, 4
RULES = (('embed', None), ('mlp', 'model'))


def _mesh():
    return jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ('data', 'model'))


class Net(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.initializers.lecun_normal()
        x = nn.Dense(
            D_HID, name='up', kernel_init=nn.with_logical_partitioning(init, ('embed', 'mlp'))
        )(x)
        return nn.Dense(
            D_OUT, name='down', kernel_init=nn.with_partitioning(init, (('data', 'model'), None))
        )(x)


def _rows(table):
    """{path: [cells of every line of its row]} of a rich table rendered plainly."""
    rows, current = {}, None
    for line in table.splitlines():
        if not line.startswith('│'):
            current = None
            continue
        cells = [c.strip() for c in line.strip('│').split('│')]
        if cells[0]:
            current = cells[0]
        if current is not None:
            rows.setdefault(current, []).append(cells)
    return rows


def _column(table, rows, path, header):
    head = next(line for line in table.splitlines() if line.startswith('┃'))
    index = [c.strip() for c in head.strip('┃').split('┃')].index(header)
    return [cells[index] for cells in rows[path] if cells[index]]


F32 = 4


def test_columns_for_logical_and_mesh_partitioned_parameters():
    x = jnp.ones((2, D_IN))
    with nn.logical_axis_rules(RULES):
        table = tabulate(
            Net(),
            jax.random.key(0),
            show_sharding=True,
            mesh=_mesh(),
            replicated_tolerance=0.5,
            console_kwargs=PLAIN,
        )(x)
    rows = _rows(table)

    def column(path, header):
        return _column(table, rows, path, header)

    # Variables are listed sorted by name: bias, kernel.
    assert column('up', 'logical axes') == ['bias: -', "kernel: ('embed', 'mlp')"]
    assert column('up', 'mesh spec') == ['bias: P(None)', "kernel: P(None, 'model')"]
    # kernel (6, 8) split 2-way on 'model' along its second axis; bias whole.
    assert column('up', 'bytes/device') == [
        f'bias: {D_HID * F32} B',
        f'kernel: {D_IN * D_HID // 2 * F32} B',
    ]
    # Copies: the kernel's 2 shards are each on the 2 'data' devices; bias on all 4.
    assert column('up', 'replication') == ['bias: x4', 'kernel: x2']
    # down's kernel (8, 4): first axis over both mesh axes, one shard per device.
    assert column('down', 'mesh spec') == ['bias: P(None)', "kernel: P(('data', 'model'), None)"]
    assert column('down', 'bytes/device') == [
        f'bias: {D_OUT * F32} B',
        f'kernel: {D_HID // 4 * D_OUT * F32} B',
    ]
    assert column('down', 'replication') == ['bias: x4', 'kernel: x1']


def test_replicated_parameters_warn_naming_the_largest():
    x = jnp.ones((2, D_IN))
    total = (D_IN * D_HID + D_HID + D_HID * D_OUT + D_OUT) * F32
    replicated = (D_HID + D_OUT) * F32  # the two biases, whole on every device
    with nn.logical_axis_rules(RULES), pytest.warns(ReplicatedParametersWarning) as caught:
        Net().tabulate(
            jax.random.key(0),
            x,
            show_sharding=True,
            mesh=_mesh(),
            replicated_tolerance=0.1,
            console_kwargs=PLAIN,
        )
    (warning,) = [w.message for w in caught if isinstance(w.message, ReplicatedParametersWarning)]
    assert (warning.replicated_bytes, warning.total_bytes) == (replicated, total)
    assert warning.offenders == (('up/bias', D_HID * F32, 4), ('down/bias', D_OUT * F32, 4))
    assert 'up/bias' in str(warning)
    assert str(pickle.loads(pickle.dumps(warning))) == str(warning)
    assert replicated / total > 0.1  # and below the 0.5 of the test above, which did not warn


def test_without_a_mesh_per_device_columns_are_na_with_the_reason():
    x = jnp.ones((2, D_IN))
    with nn.logical_axis_rules(RULES):
        table = Net().tabulate(jax.random.key(0), x, show_sharding=True, console_kwargs=PLAIN)
    rows = _rows(table)
    assert _column(table, rows, 'up', 'mesh spec') == ['bias: P(None)', "kernel: P(None, 'model')"]
    assert _column(table, rows, 'up', 'bytes/device') == ['bias: n/a', 'kernel: n/a']
    assert 'sharding: no mesh' in table


def test_sharding_columns_are_opt_in():
    table = Net().tabulate(jax.random.key(0), jnp.ones((2, D_IN)), console_kwargs=PLAIN)
    assert 'mesh spec' not in table and 'replication' not in table


def test_scan_stacked_axis_and_an_axis_the_mesh_lacks():
    class Layer(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            init = nn.with_partitioning(nn.initializers.lecun_normal(), (None, 'model'))
            return nn.Dense(D_HID, use_bias=False, kernel_init=init)(x), None

    class Stack(nn.Module):
        @nn.compact
        def __call__(self, x):
            layers = nn.scan(
                Layer,
                variable_axes={'params': 0},
                split_rngs={'params': True},
                length=3,
                metadata_params={nn.PARTITION_NAME: 'layers'},
            )
            return layers(name='layers')(x, None)[0]

    table = Stack().tabulate(
        jax.random.key(0),
        jnp.ones((2, D_HID)),
        show_sharding=True,
        mesh=_mesh(),
        console_kwargs=PLAIN,
    )
    rows = _rows(table)
    # The stacked axis is named 'layers' by metadata_params; this mesh has no
    # such axis, so the stack is not split by it, and the caption says so.
    dense = 'layers/Dense_0'
    assert _column(table, rows, dense, 'mesh spec') == ["kernel: P('layers', None, 'model')"]
    assert _column(table, rows, dense, 'bytes/device') == [
        f'kernel: {3 * D_HID * D_HID // 2 * F32:,} B'
    ]
    assert _column(table, rows, dense, 'replication') == ['kernel: x2']
    assert "mesh axes 'layers' (e.g. layers/Dense_0/kernel) are not axes of the mesh" in table
