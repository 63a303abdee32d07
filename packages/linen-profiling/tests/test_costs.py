import jax
import jax.numpy as jnp
import pytest

from linen.profiling import module_costs

B, D_IN, D_HID, D_OUT = 8, 16, 32, 4


def mlp(x, w1, b1, w2, b2):
    with jax.named_scope('MLP'):
        with jax.named_scope('Dense_0'):
            y = jax.nn.relu(x @ w1 + b1[None])
        with jax.named_scope('Dense_1'):
            return y @ w2 + b2[None]


ARGS = (
    jnp.ones((B, D_IN)),
    jnp.ones((D_IN, D_HID)),
    jnp.ones((D_HID,)),
    jnp.ones((D_HID, D_OUT)),
    jnp.ones((D_OUT,)),
)


def test_matmul_flops_go_to_their_module():
    costs = module_costs(mlp, *ARGS)
    # 2*M*K*N for the matmul, one add per output for the bias, one max for relu.
    dense_0 = 2 * B * D_IN * D_HID + B * D_HID + B * D_HID
    dense_1 = 2 * B * D_HID * D_OUT + B * D_OUT
    assert costs['MLP/Dense_0'].flops == dense_0
    assert costs['MLP/Dense_1'].flops == dense_1
    assert costs['MLP'].flops == 0
    assert costs['MLP'].inclusive_flops == dense_0 + dense_1
    assert costs.flops == dense_0 + dense_1


def test_rows_add_up_to_xla_totals():
    costs = module_costs(mlp, *ARGS)
    assert costs.flops == pytest.approx(costs.xla_totals['flops'])
    assert costs.bytes_accessed == pytest.approx(costs.xla_totals['bytes accessed'])
    # Every input is read at least once by some module.
    inputs = sum(a.size * a.dtype.itemsize for a in ARGS)
    assert costs['MLP'].inclusive_bytes_accessed >= inputs


def test_backward_pass_is_attributed_to_the_same_modules():
    loss = lambda *a: mlp(*a).sum()
    costs = module_costs(jax.grad(loss, argnums=(1, 3)), *ARGS)
    # Forward 2MKN plus, for the gradient w.r.t. the weight, another 2MKN.
    assert costs['MLP/Dense_0'].flops >= 2 * (2 * B * D_IN * D_HID)
    # Dense_1's forward output is dead (only gradients are returned); what is left
    # is the weight gradient and the gradient w.r.t. its input, 2MKN each.
    assert costs['MLP/Dense_1'].flops >= 2 * (2 * B * D_HID * D_OUT)
    assert costs.flops == pytest.approx(costs.xla_totals['flops'])


def test_scan_body_counts_once_per_iteration():
    steps, width = 5, 32

    def f(x, w):
        def body(carry, _):
            with jax.named_scope('Block'):
                return carry @ w, None

        return jax.lax.scan(body, x, None, length=steps)[0]

    costs = module_costs(f, jnp.ones((B, width)), jnp.ones((width, width)))
    assert costs['Block'].flops == steps * 2 * B * width * width


def test_fusion_bytes_follow_the_work_not_the_root_label():
    # XLA fuses the matmul into the reduction; the fusion is labelled reduce_sum.
    def f(x, w):
        with jax.named_scope('Dense_0'):
            y = x @ w
        return y.sum()

    costs = module_costs(f, jnp.ones((B, D_IN)), jnp.ones((D_IN, D_HID)))
    assert costs['Dense_0'].flops == 2 * B * D_IN * D_HID
    assert costs['Dense_0'].bytes_accessed > costs.by_path().get('', costs['Dense_0']).flops * 0
    assert costs['Dense_0'].bytes_accessed >= (B * D_IN + D_IN * D_HID) * 4 * 0.9


def test_table_lists_modules_indented_with_totals():
    table = str(module_costs(mlp, *ARGS))
    lines = table.splitlines()
    assert lines[0].startswith('Cost per module')
    assert any(line.startswith('MLP ') for line in lines)
    assert any(line.startswith('  Dense_0') for line in lines)
    assert lines[-1].startswith('total')


def test_unknown_path_raises_key_error_listing_paths():
    with pytest.raises(KeyError, match="No module path 'Nope'.*'MLP/Dense_0'"):
        module_costs(mlp, *ARGS)['Nope']


def test_accepts_already_jitted_function_and_shape_structs():
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in ARGS]
    costs = module_costs(jax.jit(mlp), *specs)
    assert costs['MLP/Dense_1'].flops == 2 * B * D_HID * D_OUT + B * D_OUT
