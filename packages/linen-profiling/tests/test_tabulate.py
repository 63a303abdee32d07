import jax
import jax.numpy as jnp
import pytest

lm = pytest.importorskip('linen.module')

from linen.profiling import tabulate  # noqa: E402


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
        return Dense(3, name='proj')(Dense(4)(x))


def _rows(table):
    return {
        line.split('|')[0].strip(): [c.strip() for c in line.split('|')]
        for line in table.splitlines()[3:]
    }


def test_rows_params_and_flops_per_call():
    table = tabulate(Counter(), jax.random.key(0), jnp.ones((2, 5)))
    lines = table.splitlines()
    assert lines[0] == 'Counter Summary'
    header = [c.strip() for c in lines[1].split('|')]
    assert header == ['path', 'module', 'inputs', 'outputs', 'counter', 'params', 'flops']
    rows = _rows(table)
    assert rows['Dense_0'][1:4] == ['Dense', 'float32[2,5]', 'float32[2,4]']
    assert rows['Dense_0'][5] == '20 (80 B)'  # 5*4 float32
    assert rows['proj'][5] == '12 (48 B)'
    assert rows['Dense_0'][6] == f'{2 * 2 * 5 * 4:,}'
    assert rows['proj'][6] == f'{2 * 2 * 4 * 3:,}'
    root = [c.strip() for c in lines[3].split('|')]
    assert root[1] == 'Counter' and root[4] == '1 (4 B)'
    total = [c.strip() for c in lines[-1].split('|')]
    assert total[1] == 'Total' and total[5] == '32 (128 B)'


def test_depth_and_no_flops():
    table = tabulate(Counter(), jax.random.key(0), jnp.ones((2, 5)), depth=0, compute_flops=False)
    assert 'Dense_0' not in table
    assert 'flops' not in table.splitlines()[1]


def test_recorder_is_gone_afterwards():
    from linen.core._plugins import get_plugin_manager

    tabulate(Counter(), jax.random.key(0), jnp.ones((2, 5)), compute_flops=False)
    assert get_plugin_manager().get_plugin('linen-profiling-tabulate') is None
