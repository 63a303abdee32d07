"""``module_memory``: parameter, gradient, optimizer and state bytes from array sizes."""

import jax
import jax.numpy as jnp
import pytest

nn = pytest.importorskip('linen.nn')
optax = pytest.importorskip('optax')

from linen.profiling import module_memory  # noqa: E402


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(8)(x)
        x = nn.BatchNorm(use_running_average=False)(x)
        return nn.Dense(2, name='head', param_dtype=jnp.bfloat16)(x)


def _variables():
    return Model().init(jax.random.key(0), jnp.ones((3, 4)))


def test_params_grads_and_state_from_array_sizes():
    memory = module_memory(_variables())
    dense = (4 * 8 + 8) * 4  # float32 kernel and bias
    head = (8 * 2 + 2) * 2  # bfloat16
    batch_norm_params = (8 + 8) * 4  # scale, bias
    batch_stats = (8 + 8) * 4  # mean, var
    assert memory['Dense_0'].params_bytes == dense
    assert memory['Dense_0'].grads_bytes == dense
    assert memory['head'].params_bytes == head
    assert memory['head'].grads_bytes == head
    assert memory['BatchNorm_0'].params_bytes == batch_norm_params
    assert memory['BatchNorm_0'].state_bytes == batch_stats
    assert memory.params_bytes == dense + head + batch_norm_params
    assert memory.state_bytes == batch_stats


def test_adam_state_is_two_moments_per_parameter_and_a_step_count():
    variables = _variables()
    opt_state = optax.adam(1e-3).init(variables['params'])
    memory = module_memory(variables, opt_state)
    for path in ('Dense_0', 'head', 'BatchNorm_0'):
        row = memory[path]
        # mu and nu, each shaped (and typed) like the parameters.
        assert row.optimizer_bytes == 2 * row.params_bytes
    # The step count belongs to no module.
    count = opt_state[0].count
    assert memory[''].optimizer_bytes == count.size * count.dtype.itemsize
    leaves = jax.tree_util.tree_leaves(opt_state)
    assert memory.optimizer_bytes == sum(x.size * x.dtype.itemsize for x in leaves)


def test_inclusive_rows_and_table():
    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Model(name='inner')(x)

    variables = Outer().init(jax.random.key(0), jnp.ones((3, 4)))
    memory = module_memory(variables)
    inner = memory['inner']
    parts = [memory[p] for p in ('inner/Dense_0', 'inner/head', 'inner/BatchNorm_0')]
    assert inner.inclusive_params_bytes == sum(p.params_bytes for p in parts)
    assert inner.params_bytes == 0
    table = str(memory)
    assert table.splitlines()[0] == 'Memory per module (from array sizes)'
    assert table.splitlines()[-1].startswith('total')
