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


def test_no_compile_without_flops(monkeypatch):
    from linen.profiling import _costs

    def fail(*args, **kwargs):
        raise AssertionError('compiled although no FLOPs were asked for')

    monkeypatch.setattr(_costs, 'module_costs', fail)
    Counter().tabulate(jax.random.key(0), jnp.ones((B, D_IN)), console_kwargs=PLAIN)


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
