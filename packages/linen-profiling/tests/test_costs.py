import jax
import jax.numpy as jnp
import pytest

from linen.profiling import label_scope, module_costs

B, D_IN, D_HID, D_OUT = 8, 16, 32, 4


def mlp(x, w1, b1, w2, b2):
    with label_scope('MLP'):
        with label_scope('Dense_0'):
            y = jax.nn.relu(x @ w1 + b1[None])
        with label_scope('Dense_1'):
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
            with label_scope('Block'):
                return carry @ w, None

        return jax.lax.scan(body, x, None, length=steps)[0]

    costs = module_costs(f, jnp.ones((B, width)), jnp.ones((width, width)))
    assert costs['Block'].flops == steps * 2 * B * width * width


def test_fusion_bytes_follow_the_work_not_the_root_label():
    # XLA fuses the matmul into the reduction; the fusion is labelled reduce_sum.
    def f(x, w):
        with label_scope('Dense_0'):
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


def _xla(compiled):
    totals = compiled.cost_analysis()
    return totals[0] if isinstance(totals, list) else totals


@pytest.mark.parametrize(
    'program',
    ['attention', 'attention_grad', 'conv', 'mlp_grad'],
)
def test_cost_model_totals_match_xla_cost_analysis(program):
    # The per-instruction model is independent of XLA's HloCostAnalysis; the whole
    # program's sums must agree with it (no loops here, so no per-iteration counts).
    def attention(x, w):
        q = x @ w
        return jnp.tanh(jax.nn.softmax(q @ q.T) @ q).mean()

    def conv(k, kk):
        return jax.lax.conv_general_dilated(k, kk, (1, 1), 'VALID').sum()

    x, w = jnp.ones((8, 16)), jnp.ones((16, 16))
    fn, args = {
        'attention': (attention, (x, w)),
        'attention_grad': (jax.grad(attention, argnums=1), (x, w)),
        'conv': (conv, (jnp.ones((2, 3, 6, 6)), jnp.ones((5, 3, 2, 2)))),
        'mlp_grad': (jax.grad(lambda *a: mlp(*a).sum(), argnums=(1, 3)), ARGS),
    }[program]
    costs = module_costs(fn, *args)
    xla = _xla(jax.jit(fn).lower(*args).compile())
    assert costs.uncosted == ()
    assert costs.flops == pytest.approx(xla['flops'], rel=1e-6)
    assert costs.transcendentals == pytest.approx(xla.get('transcendentals', 0.0), rel=1e-6)
    # Bytes follow XLA's boundary counting up to its refinements for fusions.
    assert costs.bytes_accessed == pytest.approx(xla['bytes accessed'], rel=0.1)


def test_instruction_without_a_known_cost_is_listed_and_warned_not_zero():
    from linen.profiling._costs import costs_from_hlo_text
    from linen.profiling.errors import UncostedInstructionWarning

    text = '\n'.join(
        [
            'HloModule m',
            'ENTRY %main (p: f32[4,4]) -> f32[4,4] {',
            '  %p = f32[4,4]{1,0} parameter(0)',
            '  ROOT %cc = f32[4,4]{1,0} custom-call(%p), custom_call_target="opaque",'
            ' metadata={op_name="jit(f)/Dense_0/cc"}',
            '}',
        ]
    )
    with pytest.warns(UncostedInstructionWarning, match=r'1 HLO instruction\(s\): cc'):
        costs = costs_from_hlo_text(text)
    assert costs.uncosted == ('cc (custom-call)',)


def test_linen_scan_attributes_by_the_labels_linen_pushed():
    # JAX 0.10 names the scan body closed_call, JAX 0.12 eval_jaxpr: neither matters.
    import linen.nn as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, c, _):
            return nn.Dense(8, use_bias=False)(c), None

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            scanned = nn.scan(
                Block, variable_axes={'params': 0}, split_rngs={'params': True}, length=3
            )
            return scanned()(x, None)[0]

    model, x = Model(), jnp.ones((2, 8))
    variables = model.init(jax.random.key(0), x)
    costs = module_costs(lambda v, x: model.apply(v, x), variables, x)
    assert costs['Model/ScanBlock_0/Dense_0'].flops == 3 * 2 * 2 * 8 * 8
    assert costs['Model/ScanBlock_0'].inclusive_flops == 3 * 2 * 2 * 8 * 8
    assert not [row.path for row in costs.rows if 'eval_jaxpr' in row.path or 'body' in row.path]


def _train_step_costs(remat):
    import linen.nn as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            return jnp.tanh(nn.Dense(D_HID, use_bias=False)(x))

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            block = nn.remat(Block) if remat else Block
            return nn.Dense(D_OUT, use_bias=False, name='head')(block(name='block')(x))

    model, x = Model(), jnp.ones((B, D_IN))
    variables = model.init(jax.random.key(0), x)

    def loss(v, x):
        # Squared, so the cotangent depends on the data and XLA cannot fold it.
        return (model.apply(v, x) ** 2).sum()

    return module_costs(jax.grad(loss, argnums=(0, 1)), variables, x)


def test_train_step_splits_forward_and_backward_per_module():
    costs = _train_step_costs(remat=False)
    for path, (k, n) in {
        'Model/block/Dense_0': (D_IN, D_HID),
        'Model/head': (D_HID, D_OUT),
    }.items():
        matmul = 2 * B * k * n
        row = costs[path]
        assert row.forward_flops == matmul
        # The gradients for the weight and for the input: two matmuls as big.
        assert row.backward_flops == 2 * matmul
        assert row.recompute_flops == 0
    for row in costs.rows:
        split = row.forward_flops + row.backward_flops + row.recompute_flops
        assert split == pytest.approx(row.inclusive_flops)
        split_bytes = row.forward_bytes + row.backward_bytes + row.recompute_bytes
        assert split_bytes == pytest.approx(row.inclusive_bytes_accessed)


def test_remat_recompute_is_the_recomputed_forward():
    costs = _train_step_costs(remat=True)
    matmul = 2 * B * D_IN * D_HID
    dense = costs['Model/block/Dense_0']
    assert dense.backward_flops == 2 * matmul
    # The recomputation is the forward matmul again, unless XLA merged the two
    # identical matmuls into one (it does on CPU with jaxlib 0.10, keeping either
    # label): the program then computes it once, and it counts once, as forward.
    assert dense.forward_flops == matmul
    assert dense.recompute_flops in (0, matmul)
    if jax.__version_info__ >= (0, 12):
        assert dense.recompute_flops == matmul
    assert costs['Model/head'].recompute_flops == 0


@pytest.mark.parametrize(
    'program', ['max_pool_grad', 'avg_pool_same', 'cumsum_grad', 'conv_strided']
)
def test_window_and_scatter_ops_match_xla_cost_analysis(program):
    # Padded, strided and dilated windows, variadic reduce-windows and the
    # scatter of max pooling's gradient, cumulative sums: each counted as XLA does.
    import linen.nn as nn

    def conv(x, k):
        y = jax.lax.conv_general_dilated(
            x, k, (2, 1), ((1, 2), (0, 0)), lhs_dilation=(1, 2), rhs_dilation=(2, 1),
            dimension_numbers=('NHWC', 'HWIO', 'NHWC'),
        )  # fmt: skip
        return (y**2).sum()

    x = jnp.arange(2 * 8 * 8 * 3, dtype=jnp.float32).reshape((2, 8, 8, 3))
    fn, args = {
        'max_pool_grad': (jax.grad(lambda x: (nn.max_pool(x, (2, 2), (2, 2)) ** 2).sum()), (x,)),
        'avg_pool_same': (lambda x: nn.avg_pool(x, (3, 3), padding='SAME').sum(), (x,)),
        'cumsum_grad': (jax.grad(lambda x: (jnp.cumsum(x, axis=1) ** 2).sum()), (x,)),
        'conv_strided': (jax.grad(conv, argnums=(0, 1)), (x, jnp.ones((3, 2, 3, 4)))),
    }[program]
    costs = module_costs(fn, *args)
    assert costs.uncosted == ()
    assert costs.flops == _xla(jax.jit(fn).lower(*args).compile())['flops']
