"""``saved_activations``: activation bytes per module, against shapes and ``memory_analysis()``."""

import pickle
import warnings

import jax
import jax.numpy as jnp
import pytest

nn = pytest.importorskip('linen.nn')
optax = pytest.importorskip('optax')

from linen.profiling import Report, module_memory, saved_activations  # noqa: E402
from linen.profiling.errors import MemoryAnalysisUnavailableWarning  # noqa: E402

# Big enough that XLA keeps the matmuls as matmuls (tiny ones it fuses whole).
B, D_IN, D_HID, D_OUT = 32, 64, 128, 16
F32 = 4


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.Dense(D_HID, name='hidden')(x)
        return nn.Dense(D_OUT, name='out')(nn.relu(h))


MODEL = MLP()
X, Y = jnp.ones((B, D_IN)), jnp.ones((B, D_OUT))
VARIABLES = MODEL.init(jax.random.key(0), X)


def loss(params, x, y):
    return ((MODEL.apply({'params': params}, x) - y) ** 2).mean()


def nbytes(tree):
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(tree))


def test_saved_bytes_per_module_from_shapes():
    saved = saved_activations(jax.value_and_grad(loss), VARIABLES['params'], X, Y)
    # What the backward pass reads, by hand: relu's derivative needs the hidden
    # pre-activation (hidden's matmul output), the kernel gradient of `out`
    # needs its input relu(h) (computed under the root label: relu is no
    # Module), and the loss derivative needs `out`'s matmul output. x and the
    # kernels are arguments, not activations.
    assert saved.own == {
        'MLP/hidden': B * D_HID * F32,
        'MLP': B * D_HID * F32,
        'MLP/out': B * D_OUT * F32,
    }
    assert saved['MLP'] == saved.total_bytes == (2 * B * D_HID + B * D_OUT) * F32
    assert 'MLP/hidden' in str(saved)


def test_train_step_totals_agree_with_memory_analysis():
    tx = optax.adam(1e-3)
    opt_state = tx.init(VARIABLES['params'])

    def step(params, opt_state, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    saved = saved_activations(
        jax.jit(step, donate_argnums=(0, 1)), VARIABLES['params'], opt_state, X, Y
    )
    memory = module_memory(VARIABLES, opt_state, activations=saved)
    assert memory['hidden'].activations_bytes == B * D_HID * F32
    assert memory[''].activations_bytes == B * D_HID * F32  # the root's relu output
    assert memory.activations_bytes == saved.total_bytes
    xla = saved.memory_analysis
    batch = X.nbytes + Y.nbytes
    # Field by field, the parts that map one to one: the arguments are the
    # parameters, the optimizer state and the batch; donation makes the new
    # parameters and optimizer state alias the old.
    assert xla['argument_size_in_bytes'] == memory.params_bytes + memory.optimizer_bytes + batch
    assert xla['alias_size_in_bytes'] == memory.params_bytes + memory.optimizer_bytes
    # The whole footprint: arguments, plus outputs not aliased, plus temporaries
    # (gradients, saved activations, scratch). Our sum counts gradients and
    # activations as if all were live at once; XLA reuses a buffer once its
    # value is read, so the sum is an upper bound, close when parameters and
    # optimizer state dominate.
    footprint = (
        xla['argument_size_in_bytes']
        + xla['output_size_in_bytes']
        - xla['alias_size_in_bytes']
        + xla['temp_size_in_bytes']
    )
    ours = memory.total_bytes + batch + 4  # + the float32 loss output
    assert footprint <= ours <= 1.10 * footprint, (ours, footprint, xla)
    assert xla['temp_size_in_bytes'] <= memory.grads_bytes + memory.activations_bytes
    report = Report.join(memory=memory)
    assert report.rows['hidden']['activations_bytes'] == B * D_HID * F32


def test_without_activations_the_column_is_absent_not_zero():
    memory = module_memory(VARIABLES)
    assert memory.activations_bytes is None
    assert memory['hidden'].activations_bytes is None
    assert 'activations_bytes' not in Report.join(memory=memory).columns


def test_no_memory_analysis_is_a_typed_warning_not_zeros():
    from linen.profiling._activations import memory_analysis_dict

    class NoAnalysis:
        def memory_analysis(self):
            return None

    with pytest.warns(MemoryAnalysisUnavailableWarning, match='returned None'):
        assert memory_analysis_dict(NoAnalysis()) is None

    class Raises:
        def memory_analysis(self):
            raise NotImplementedError('not on this backend')

    with pytest.warns(MemoryAnalysisUnavailableWarning, match='not on this backend'):
        assert memory_analysis_dict(Raises()) is None
    warning = MemoryAnalysisUnavailableWarning('x')
    assert str(pickle.loads(pickle.dumps(warning))) == str(warning)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert memory_analysis_dict(jax.jit(jnp.sin).lower(1.0).compile()) is not None


@pytest.mark.parametrize('remat', [False, True])
def test_remat_saves_nothing_inside_the_rematerialized_block(remat):
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(D_HID, name='second')(jnp.tanh(nn.Dense(D_HID, name='first')(x)))

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            return (nn.remat(Block) if remat else Block)(name='block')(x)

    model = Model()
    x = jnp.ones((B, D_HID))
    params = model.init(jax.random.key(0), x)['params']
    grad = jax.grad(lambda p: (model.apply({'params': p}, x) ** 2).sum())
    saved = saved_activations(grad, params)
    # Without remat the block keeps tanh's output (tanh's derivative and the
    # second kernel's gradient both read it); with remat it keeps nothing of its
    # own and recomputes it in the backward pass. (Its inclusive total also holds
    # what its submodule 'second' keeps, which depends on how the XLA version
    # fuses the loss: not what this test is about.)
    assert saved.own.get('Model/block', 0) == (0 if remat else B * D_HID * F32)


def test_scan_residuals_are_stacked_per_iteration_under_the_scanned_module():
    length = 3

    class Cell(nn.Module):
        @nn.compact
        def __call__(self, carry, _):
            return jnp.tanh(nn.Dense(D_HID)(carry)), None

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            cells = nn.scan(
                Cell, variable_axes={'params': 0}, split_rngs={'params': True}, length=length
            )
            return cells(name='cells')(x, None)[0]

    model = Model()
    x = jnp.ones((B, D_HID))
    params = model.init(jax.random.key(0), x)['params']
    saved = saved_activations(
        jax.grad(lambda p: (model.apply({'params': p}, x) ** 2).sum()), params
    )
    step = B * D_HID * F32
    # Every value kept from the loop is stacked, one slice per iteration: the
    # cell's tanh output (its derivative reads it; jax 0.10 also keeps the
    # derivative 1 - tanh^2, computed in the forward pass) under the cell, and
    # the carries the cell's Dense read (for its kernel gradient).
    in_loop = [v for v in saved.values if v.path.startswith('Model')]
    assert all(v.shape.startswith(f'f32[{length},{B},{D_HID}]') for v in in_loop)
    assert saved['Model/cells'] in (length * step, 2 * length * step)
    assert saved['Model'] == len(in_loop) * length * step >= 2 * length * step
