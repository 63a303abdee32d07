"""Forward, backward and remat-recompute FLOPs per module of a train step, against hand counts.

Every expected number here is computed by hand from the layer shapes:

- a matmul ``[M, K] @ [K, N]`` costs ``2 * M * K * N`` FLOPs forward; its
  backward pass is the gradient for the weight (the same size) and, when the
  input needs a gradient, the gradient for the input (the same size again);
- a convolution costs ``2 * N * H_out * W_out * C_out * kh * kw * C_in`` forward
  (one multiply-add per kernel tap that falls on the input: with ``'VALID'``
  padding, every tap); the kernel gradient and the input gradient are
  convolutions with exactly as many multiply-adds.

JAX transposes only what needs a gradient: the first layer of a train step,
whose input is data, gets the kernel gradient and no input gradient, so its
backward pass is 1x its forward pass, not 2x.
"""

import jax
import jax.numpy as jnp
import pytest

nn = pytest.importorskip('linen.nn')

from linen.profiling import module_costs, module_path_from_op_name  # noqa: E402

# A CNN: Conv (3x3, no bias) -> relu -> Dense head.
N, H, W, C_IN, C_OUT, KH, KW, D = 2, 6, 6, 3, 4, 3, 3, 5


def _cnn_train_step_costs(padding: str, remat: bool, input_grad: bool):
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.relu(nn.Conv(C_OUT, (KH, KW), padding=padding, use_bias=False)(x))

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            y = (nn.remat(Block) if remat else Block)(name='block')(x)
            return nn.Dense(D, use_bias=False, name='head')(y.reshape((y.shape[0], -1)))

    model, x = CNN(), jnp.ones((N, H, W, C_IN))
    variables = model.init(jax.random.key(0), x)

    def loss(v, x):
        # Squared, so the cotangent depends on the data and XLA cannot fold it.
        return (model.apply(v, x) ** 2).sum()

    step = jax.grad(loss, argnums=(0, 1) if input_grad else 0)
    return module_costs(step, variables, x)


def _valid_taps(size: int, kernel: int, pad_lo: int, pad_hi: int) -> int:
    """Kernel taps, over every output position, that fall on the input (stride 1)."""
    out = size + pad_lo + pad_hi - kernel + 1
    return sum(1 for o in range(out) for k in range(kernel) if 0 <= o + k - pad_lo < size)


def _conv_forward_flops(padding: str) -> int:
    if padding == 'VALID':
        h_out, w_out = H - KH + 1, W - KW + 1
        # The formula of the module docstring: every tap falls on the input.
        return 2 * N * h_out * w_out * C_OUT * KH * KW * C_IN
    # 'SAME' pads one row and column each side for a 3x3 kernel; taps on the
    # padding are not multiply-adds.
    return 2 * N * C_OUT * C_IN * _valid_taps(H, KH, 1, 1) * _valid_taps(W, KW, 1, 1)


@pytest.mark.parametrize('padding', ['VALID', 'SAME'])
@pytest.mark.parametrize('input_grad', [False, True], ids=['params-grad', 'params-and-input-grad'])
def test_cnn_conv_and_dense_forward_backward(padding, input_grad):
    costs = _cnn_train_step_costs(padding, remat=False, input_grad=input_grad)
    conv = _conv_forward_flops(padding)
    features = N * C_OUT * (H if padding == 'SAME' else H - KH + 1) ** 2
    head = 2 * features * D
    if padding == 'VALID':
        assert conv == 2 * N * 4 * 4 * C_OUT * KH * KW * C_IN == 6912
    else:
        assert conv == 2 * N * C_OUT * C_IN * 16 * 16 == 12288
    row = costs['CNN/block/Conv_0']
    assert row.forward_flops == conv
    # The kernel gradient always; the input gradient only when x needs one.
    assert row.backward_flops == (2 if input_grad else 1) * conv
    assert row.recompute_flops == 0
    assert costs['CNN/head'].forward_flops == head
    assert costs['CNN/head'].backward_flops == 2 * head
    # No convolution is left outside the modules (XLA rewrites the kernel
    # gradient's convolution into a new instruction without a label).
    stray = [
        c.instruction
        for c in costs.instructions
        if c.opcode == 'convolution' and module_path_from_op_name(c.op_name) == ''
    ]
    assert stray == []
    for r in costs.rows:
        assert r.forward_flops + r.backward_flops + r.recompute_flops == pytest.approx(
            r.inclusive_flops
        )


def test_cnn_under_remat_recomputes_the_forward_convolution():
    costs = _cnn_train_step_costs('VALID', remat=True, input_grad=False)
    conv = _conv_forward_flops('VALID')
    row = costs['CNN/block/Conv_0']
    assert row.forward_flops == conv
    assert row.backward_flops == conv  # the kernel gradient (x needs none)
    # The recomputation is the forward convolution again, when the compiled
    # program runs it twice. The XLA of jaxlib 0.10 merges the two identical
    # convolutions into one (common-subexpression elimination sees through the
    # optimization barrier): nothing is recomputed, and nothing is reported.
    # Counted in the compiled program's text: convolutions with the forward's output.
    forward_shape = f'f32[{N},{H - KH + 1},{W - KW + 1},{C_OUT}]'
    computed_twice = costs.hlo_text.count(f'= {forward_shape}{{3,2,1,0}} convolution(') == 2
    assert row.recompute_flops == (conv if computed_twice else 0)
    if jax.__version_info__ >= (0, 12):
        assert computed_twice
    assert costs['CNN/head'].recompute_flops == 0


# An attention block: query/key/value/output projections and the two attention
# matmuls, each in its own module so that each row holds one matmul.
B, L, E, HEADS = 2, 4, 8, 2
DH = E // HEADS


class Scores(nn.Module):
    @nn.compact
    def __call__(self, q, k):
        return jnp.einsum('bqhd,bkhd->bhqk', q, k)


class Mix(nn.Module):
    @nn.compact
    def __call__(self, weights, v):
        return jnp.einsum('bhqk,bkhd->bqhd', weights, v)


class Attention(nn.Module):
    @nn.compact
    def __call__(self, x):
        def heads(name):
            return nn.Dense(E, use_bias=False, name=name)(x).reshape((B, L, HEADS, DH))

        q, k, v = heads('query'), heads('key'), heads('value')
        weights = jax.nn.softmax(Scores()(q, k), axis=-1)
        out = Mix()(weights, v).reshape((B, L, E))
        return nn.Dense(E, use_bias=False, name='out')(out)


@pytest.mark.parametrize('input_grad', [False, True], ids=['params-grad', 'params-and-input-grad'])
def test_attention_block_forward_backward_per_module(input_grad):
    model, x = Attention(), jnp.ones((B, L, E))
    variables = model.init(jax.random.key(0), x)
    # Data-dependent input so the cotangents are not constants XLA could fold.
    x = jnp.arange(B * L * E, dtype=jnp.float32).reshape((B, L, E)) / 100.0

    def loss(v, x):
        return (model.apply(v, x) ** 2).sum()

    costs = module_costs(jax.grad(loss, argnums=(0, 1) if input_grad else 0), variables, x)
    projection = 2 * B * L * E * E
    attention_matmul = 2 * B * HEADS * L * L * DH
    # Every matmul but the input projections has both operands in need of a
    # gradient: backward 2x forward. The projections of x get the weight
    # gradient, and the gradient for x only when x needs one.
    expected = {
        'Attention/out': (projection, 2 * projection),
        'Attention/Scores_0': (attention_matmul, 2 * attention_matmul),
        'Attention/Mix_0': (attention_matmul, 2 * attention_matmul),
    }
    for path in ('query', 'key', 'value'):
        expected[f'Attention/{path}'] = (projection, (2 if input_grad else 1) * projection)
    for path, (forward, backward) in expected.items():
        row = costs[path]
        assert row.forward_flops == forward, path
        assert row.recompute_flops == 0, path
        if input_grad and path.rsplit('/', 1)[1] in ('query', 'key', 'value'):
            # x feeds three matmuls: its three cotangents are summed, two adds
            # of B*L*E elements, each under one of the projections.
            assert backward <= row.backward_flops <= backward + B * L * E, path
        else:
            assert row.backward_flops == backward, path
    if input_grad:
        projections = [costs[f'Attention/{p}'].backward_flops for p in ('query', 'key', 'value')]
        assert sum(projections) == 3 * 2 * projection + 2 * B * L * E
    block = costs['Attention']
    children = sum(costs[path].flops for path in expected)
    assert block.inclusive_flops == block.flops + children
    # The block's own work is the softmax: a few elementwise FLOPs per attention
    # weight, forward and backward; no matmul is left in it.
    assert 0 < block.flops <= 16 * B * HEADS * L * L


def test_first_conv_of_an_optax_train_step_keeps_its_kernel_gradient():
    # The demo's shape of model: remat'd Conv (SAME) + BatchNorm + relu blocks,
    # trained with Adam in one jitted step. XLA rebuilds the first block's
    # kernel-gradient convolution without a label and fuses the bitcast that
    # kept it into Adam's update: the label comes from the unoptimized program.
    optax = pytest.importorskip('optax')

    class Block(nn.Module):
        features: int

        @nn.compact
        def __call__(self, x):
            x = nn.Conv(self.features, (KH, KW), use_bias=False)(x)
            return nn.relu(nn.BatchNorm(use_running_average=False)(x))

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.remat(Block)(C_OUT)(x)
            x = nn.remat(Block)(2 * C_OUT)(x)
            return nn.Dense(D, name='head')(x.reshape((x.shape[0], -1)))

    model, x = Net(), jnp.ones((N, H, W, 1))
    variables = model.init(jax.random.key(0), x)
    tx = optax.adam(1e-3)

    def step(params, stats, opt_state, x):
        def loss(params):
            y, updates = model.apply(
                {'params': params, 'batch_stats': stats}, x, mutable=['batch_stats']
            )
            return (y**2).mean(), updates

        grads, _ = jax.grad(loss, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    params = variables['params']
    costs = module_costs(step, params, variables['batch_stats'], tx.init(params), x)
    taps = _valid_taps(H, KH, 1, 1) * _valid_taps(W, KW, 1, 1)
    for path, c_in, c_out, backward in (
        ('Net/CheckpointBlock_0/Conv_0', 1, C_OUT, 1),  # x is data: kernel gradient only
        ('Net/CheckpointBlock_1/Conv_0', C_OUT, 2 * C_OUT, 2),
    ):
        forward = 2 * N * c_out * c_in * taps
        row = costs[path]
        assert row.forward_flops == forward, path
        assert row.backward_flops == backward * forward, path
        # Recomputed, or (jaxlib 0.10's XLA) merged with the forward convolution.
        assert row.recompute_flops in (0, forward), path
        if jax.__version_info__ >= (0, 12):
            assert row.recompute_flops == forward, path
