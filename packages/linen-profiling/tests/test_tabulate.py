"""``tabulate`` / ``Module.tabulate``: rows, variables, FLOPs against hand-computed numbers."""

import jax
import jax.numpy as jnp
import pytest

lm = pytest.importorskip('linen.module')
nn = pytest.importorskip('linen.nn')

from linen.profiling import tabulate  # noqa: E402

PLAIN = {'width': 200, 'force_terminal': False}
B, D_IN, D_HID, D_OUT = 2, 5, 4, 3


class Dense(lm.Module):
    features: int

    @lm.compact
    def __call__(self, x):
        kernel = self.param('kernel', lambda key, s: jnp.ones(s), (x.shape[-1], self.features))
        return x @ kernel


class Counter(lm.Module):
    @lm.compact
    def __call__(self, x):
        count = self.variable('counter', 'count', lambda: jnp.zeros((), jnp.int32))
        count.value += 1
        return Dense(D_OUT, name='proj')(Dense(D_HID)(x))


def _cells(table):
    """{path or module: [cell texts of its first line]} of a rich table rendered plainly."""
    rows = {}
    for line in table.splitlines():
        if line.startswith('│'):
            cells = [c.strip() for c in line.strip('│').split('│')]
            if cells[0] or cells[1]:
                rows.setdefault(cells[0] or cells[1], cells)
    return rows


def test_rows_variables_and_totals():
    table = Counter().tabulate(jax.random.key(0), jnp.ones((B, D_IN)), console_kwargs=PLAIN)
    assert 'Counter Summary' in table
    header = next(line for line in table.splitlines() if line.startswith('┃'))
    assert [c.strip() for c in header.strip('┃').split('┃')] == [
        'path',
        'module',
        'inputs',
        'outputs',
        'counter',
        'params',
    ]
    rows = _cells(table)
    assert rows['Dense_0'][1:4] == ['Dense', f'float32[{B},{D_IN}]', f'float32[{B},{D_HID}]']
    assert rows['Dense_0'][5] == f'kernel: float32[{D_IN},{D_HID}]'
    assert f'{D_IN * D_HID} ({D_IN * D_HID * 4} B)' in table
    total = D_IN * D_HID + D_HID * D_OUT
    assert f'Total Parameters: {total + 1} ({(total + 1) * 4} B)' in table


def test_flops_and_vjp_flops_match_hand_computed_matmul_counts():
    table = tabulate(
        Counter(),
        jax.random.key(0),
        compute_flops=True,
        compute_vjp_flops=True,
        console_kwargs=PLAIN,
    )(jnp.ones((B, D_IN)))
    rows = _cells(table)
    forward = {'Dense_0': 2 * B * D_IN * D_HID, 'proj': 2 * B * D_HID * D_OUT}
    for path, flops in forward.items():
        assert float(rows[path][4]) == flops
        # Backward of a matmul: the gradient for the weight and for the input,
        # each as costly as the forward (the input is differentiated too).
        assert float(rows[path][5]) == 3 * flops
    assert float(rows['Counter'][4]) == sum(forward.values()) + 1  # + the counter increment


def test_depth_summarizes_hidden_submodules_and_show_repeated():
    class Twice(lm.Module):
        @lm.compact
        def __call__(self, x):
            block = Counter()
            return block(x) + block(x)

    x = jnp.ones((B, D_IN))
    shallow = Twice().tabulate(jax.random.key(0), x, depth=1, console_kwargs=PLAIN)
    rows = _cells(shallow)
    assert 'Counter_0/Dense_0' not in rows
    params = D_IN * D_HID + D_HID * D_OUT
    assert rows['Counter_0'][5] == f'{params} ({params * 4} B)'  # the hidden Dense layers
    assert shallow.count('│ Counter_0 ') == 1
    repeated = Twice().tabulate(
        jax.random.key(0), x, depth=1, show_repeated=True, console_kwargs=PLAIN
    )
    assert repeated.count('│ Counter_0 ') == 2


@pytest.mark.parametrize('transform', ['vmap', 'scan', 'remat'])
def test_lifted_transforms_give_flops_not_zero(transform):
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _=None):
            y = nn.Dense(D_IN, use_bias=False)(x)
            return (y, None) if transform == 'scan' else y

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            if transform == 'vmap':
                inner = nn.vmap(
                    Block, variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=0
                )
                return inner()(x)
            if transform == 'scan':
                inner = nn.scan(
                    Block, variable_axes={'params': 0}, split_rngs={'params': True}, length=3
                )
                return inner()(x, None)[0]
            return nn.remat(Block)()(x)

    table = Model().tabulate(
        jax.random.key(0),
        jnp.ones((3, B, D_IN)),
        compute_flops=True,
        compute_vjp_flops=True,
        console_kwargs=PLAIN,
    )
    root = _cells(table)['Model']
    # vmap: 3 matmuls of (B, D_IN) x (D_IN, D_IN); remat: one of (3*B, D_IN) x
    # (D_IN, D_IN); scan: 3 iterations of that one, plus its loop counter.
    matmuls = 2 * 3 * B * D_IN * D_IN * (3 if transform == 'scan' else 1)
    assert matmuls <= float(root[4]) <= matmuls + 10
    assert float(root[5]) >= 2 * matmuls
    assert 'n/a' not in table


def test_unknown_flops_are_na_with_the_reason():
    class Dead(lm.Module):
        @lm.compact
        def __call__(self, x):
            Dense(7, name='unused')(x)  # its output is dropped: XLA removes its work
            return Dense(D_OUT, name='used')(x)

    table = Dead().tabulate(
        jax.random.key(0), jnp.ones((B, D_IN)), compute_flops=True, console_kwargs=PLAIN
    )
    rows = _cells(table)
    assert rows['unused'][4] == 'n/a'
    assert float(rows['used'][4]) == 2 * B * D_IN * D_OUT
    assert 'no instruction of that call is left in the optimized program' in table


def test_compiles_only_when_costs_are_asked_for():
    import jax.monitoring

    compiles = []

    def listener(name, duration, **kwargs):
        if name.endswith('backend_compile_duration'):
            compiles.append(name)

    key, x = jax.random.key(0), jnp.ones((B, D_IN))
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        Counter().tabulate(key, x, console_kwargs=PLAIN)
        assert compiles == []
        Counter().tabulate(key, x, compute_flops=True, console_kwargs=PLAIN)  # warms caches
        del compiles[:]
        Counter().tabulate(key, x, compute_flops=True, console_kwargs=PLAIN)
        assert len(compiles) == 1  # apply
        del compiles[:]
        Counter().tabulate(key, x, compute_flops=True, compute_vjp_flops=True, console_kwargs=PLAIN)
        assert len(compiles) == 2  # apply, and its vjp
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


class TwoInTwoOut(nn.Module):
    @nn.compact
    def __call__(self, a, b):
        return {'a': nn.Dense(D_OUT, name='da')(a)}, (nn.Dense(D_HID, name='db')(b), a)


def test_multiple_inputs_and_outputs():
    a, b = jnp.ones((B, D_IN)), jnp.ones((B, D_OUT))
    table = TwoInTwoOut().tabulate(
        jax.random.key(0), a, b, compute_flops=True, compute_vjp_flops=True, console_kwargs=PLAIN
    )
    lines = table.splitlines()
    root = next(i for i, line in enumerate(lines) if '│ TwoInTwoOut' in line)
    # inputs: both arrays; outputs: the dict and the tuple, each leaf's shape.
    inputs = [line.split('│')[3].strip() for line in lines[root : root + 3]]
    outputs = [line.split('│')[4].strip() for line in lines[root : root + 3]]
    assert inputs[:2] == [f'- float32[{B},{D_IN}]', f'- float32[{B},{D_OUT}]']
    assert outputs == [
        f'- a: float32[{B},{D_OUT}]',
        f'- - float32[{B},{D_HID}]',
        f'- float32[{B},{D_IN}]',  # indented under the tuple (stripped here)
    ]
    rows = _cells(table)
    da, db = 2 * B * D_IN * D_OUT + B * D_OUT, 2 * B * D_OUT * D_HID + B * D_HID  # matmul + bias
    assert float(rows['da'][4]) == da
    assert float(rows['db'][4]) == db
    assert float(rows['TwoInTwoOut'][4]) == da + db
    assert float(rows['da'][5]) >= 2 * da  # backward: at least the two matmul gradients


class Collective(nn.Module):
    """Meant to run under ``jax.pmap(..., axis_name='batch')``: a mean over devices."""

    @nn.compact
    def __call__(self, x):
        y = nn.Dense(D_HID)(x)
        return jax.lax.pmean(y, 'batch')


def test_collective_under_pmap_is_tabulated_per_device():
    x = jnp.ones((B, D_IN))
    # Alone, the model cannot run: its axis is bound by the pmap it is meant for.
    with pytest.raises(NameError, match='unbound axis name: batch'):
        jax.eval_shape(Collective().init, jax.random.key(0), x)
    table = Collective().tabulate(jax.random.key(0), x, compute_flops=True, console_kwargs=PLAIN)
    rows = _cells(table)
    assert rows['Dense_0'][3] == f'float32[{B},{D_HID}]'
    assert float(rows['Dense_0'][4]) == 2 * B * D_IN * D_HID + B * D_HID
    assert "collectives over axis 'batch'" in table


def test_collectives_under_shard_map_give_per_device_flops():
    import numpy as np
    from jax.sharding import PartitionSpec as P

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]), ('d',))

    class Sharded(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.Dense(D_HID)(x)
            total = jax.shard_map(
                lambda h: jax.lax.psum(h, 'd'), mesh=mesh, in_specs=P('d'), out_specs=P()
            )(h)
            return total, nn.Dense(D_OUT, name='head')(x)

    x = jnp.ones((4 * B, D_IN))
    table = Sharded().tabulate(
        jax.random.key(0), x, compute_flops=True, compute_vjp_flops=True, console_kwargs=PLAIN
    )
    rows = _cells(table)
    # Dense_0 feeds the shard_map split over 4 devices along the batch: XLA's
    # sharding propagation splits x, so each device computes a quarter of
    # Dense_0 and of head (which reads the same x).
    assert float(rows['Dense_0'][4]) == (2 * 4 * B * D_IN * D_HID + 4 * B * D_HID) / 4
    assert float(rows['head'][4]) == (2 * 4 * B * D_IN * D_OUT + 4 * B * D_OUT) / 4
    assert 'per device: the program is partitioned over 4 devices' in table
    assert 'n/a' not in table


def test_calls_without_work_count_zero_flops_and_python_outputs_are_constants():
    class AddOne(lm.Module):
        def __call__(self, x):
            return x + 1

    class Model(lm.Module):
        @lm.compact
        def __call__(self, x):
            y = Dense(3, name='used')(x)
            y = nn.Dropout(0.5, deterministic=True)(y)  # returns its input: no work
            return y, AddOne()(x=2.5)  # a Python float: a constant of the program

    table = Model().tabulate(
        jax.random.key(0),
        jnp.ones((B, D_IN)),
        compute_flops=True,
        compute_vjp_flops=True,
        console_kwargs=PLAIN,
    )
    rows = _cells(table)
    assert rows['Dropout_0'][4:6] == ['0', '0']
    assert rows['AddOne_0'][4:6] == ['0', '0']
    assert rows['AddOne_0'][2:4] == ['x: 2.5', '3.5']
    assert float(rows['used'][4]) == 2 * B * D_IN * 3
    assert 'n/a' not in table


def test_default_console_is_styled_as_a_terminal():
    table = Dense(3).tabulate(jax.random.key(0), jnp.ones((1, 2)))
    assert '\x1b[2mfloat32\x1b[0m[1,2]' in table  # dim dtype
    assert '\x1b[1m6 \x1b[0m\x1b[1;2m(24 B)\x1b[0m' in table  # bold count, bold dim bytes
    plain = Dense(3).tabulate(jax.random.key(0), jnp.ones((1, 2)), console_kwargs=PLAIN)
    assert '\x1b[' not in plain


def test_alike_calls_of_one_instance_each_show_one_calls_flops():
    class Reuse(lm.Module):
        @lm.compact
        def __call__(self, x):
            shared = Dense(D_IN, name='shared')
            return shared(jnp.tanh(shared(jnp.tanh(shared(x)))))

    table = Reuse().tabulate(
        jax.random.key(0),
        jnp.ones((B, D_IN)),
        compute_flops=True,
        show_repeated=True,
        console_kwargs=PLAIN,
    )
    one_call = 2 * B * D_IN * D_IN
    shared = [line for line in table.splitlines() if line.startswith('│ shared')]
    assert len(shared) == 3
    for line in shared:
        assert float(line.split('│')[5]) == one_call
    assert float(_cells(table)['Reuse'][4]) >= 3 * one_call


def test_calls_of_one_instance_with_different_inputs_show_them_together_and_say_so():
    class Reuse(lm.Module):
        @lm.compact
        def __call__(self, x):
            shared = Dense(D_IN, name='shared')
            return shared(x).sum() + shared(jnp.concatenate([x, x])).sum()

    table = Reuse().tabulate(
        jax.random.key(0), jnp.ones((B, D_IN)), compute_flops=True, console_kwargs=PLAIN
    )
    assert float(_cells(table)['shared'][4]) == 2 * 3 * B * D_IN * D_IN
    assert 'calls of one module instance with different inputs share its label' in table
