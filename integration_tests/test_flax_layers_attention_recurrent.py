"""Flax as an oracle for the attention and recurrent layers.

For the same PRNG key, every layer must give the same variable tree (paths, shapes,
values) and the same outputs as ``flax.linen``.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
import pytest

fnn = pytest.importorskip('flax.linen')

import linen.layers as ll  # noqa: E402
from integration_tests.oracle import assert_same_bits  # noqa: E402
from linen.module import Module, compact  # noqa: E402

pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]

KEYS = jax.random.split(jax.random.key(2024), 8)


def _flat(tree, prefix=''):
    out = {}
    for k, v in tree.items():
        path = f'{prefix}/{k}'
        if isinstance(v, Mapping):
            out.update(_flat(v, path))
        else:
            out[path] = np.asarray(v)
    return out


def assert_same_variables(ours, theirs, rtol=0.0, atol=0.0):
    a, b = _flat(ours), _flat(theirs)
    assert sorted(a) == sorted(b)
    for path in a:
        assert a[path].shape == b[path].shape, path
        assert a[path].dtype == b[path].dtype, path
        np.testing.assert_allclose(a[path], b[path], rtol=rtol, atol=atol, err_msg=path)


def assert_same_outputs(ours, theirs, tol=1e-6):
    leaves_a, tree_a = jax.tree_util.tree_flatten(ours)
    leaves_b, tree_b = jax.tree_util.tree_flatten(theirs)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(
            np.asarray(x, np.float32), np.asarray(y, np.float32), rtol=tol, atol=tol
        )


def _normal(i, shape, dtype=jnp.float32):
    return jax.random.normal(KEYS[i], shape, dtype)


# ----------------------------------------------------------------------------- functions

FUNCTION_CASES = {
    'plain': {},
    'bias': {'bias': _normal(3, (2, 1, 4, 5))},
    'mask': {'mask': jax.random.bernoulli(KEYS[4], 0.6, (2, 1, 4, 5))},
    'dropout-broadcast': {'dropout_rate': 0.3, 'dropout_rng': KEYS[5]},
    'dropout-full': {'dropout_rate': 0.3, 'dropout_rng': KEYS[5], 'broadcast_dropout': False},
    'deterministic': {'dropout_rate': 0.3, 'dropout_rng': KEYS[5], 'deterministic': True},
}


@pytest.mark.parametrize('case', sorted(FUNCTION_CASES))
@pytest.mark.parametrize('dtype', [jnp.float32, jnp.bfloat16])
def test_dot_product_attention(case, dtype):
    kwargs = FUNCTION_CASES[case]
    q = _normal(0, (2, 4, 2, 8), dtype)
    k = _normal(1, (2, 5, 2, 8), dtype)
    v = _normal(2, (2, 5, 2, 6), dtype)
    assert_same_outputs(
        ll.dot_product_attention(q, k, v, **kwargs), fnn.dot_product_attention(q, k, v, **kwargs)
    )
    assert_same_outputs(
        ll.dot_product_attention_weights(q, k, **kwargs),
        fnn.dot_product_attention_weights(q, k, **kwargs),
    )


@pytest.mark.parametrize('kwargs', [{'force_fp32_for_softmax': True}, {'dtype': jnp.float32}])
def test_dot_product_attention_dtype_options(kwargs):
    q, k, v = (_normal(i, (2, 4, 2, 8), jnp.bfloat16) for i in range(3))
    assert_same_outputs(
        ll.dot_product_attention(q, k, v, **kwargs), fnn.dot_product_attention(q, k, v, **kwargs)
    )


def test_masks():
    x = jnp.array([[1, 1, 0, 1], [0, 1, 1, 1]])
    y = jnp.array([[1, 0, 1], [1, 1, 0]])
    assert_same_outputs(ll.make_attention_mask(x, y), fnn.make_attention_mask(x, y))
    assert_same_outputs(
        ll.make_attention_mask(x, y, jnp.greater, 2, jnp.int32),
        fnn.make_attention_mask(x, y, jnp.greater, 2, jnp.int32),
    )
    assert_same_outputs(ll.make_causal_mask(x, 1), fnn.make_causal_mask(x, 1))
    a, b = ll.make_causal_mask(x), ll.make_attention_mask(x, x)
    assert_same_outputs(ll.combine_masks(a, None, b), fnn.combine_masks(a, None, b))
    assert ll.combine_masks(None) is None and fnn.combine_masks(None) is None


# ----------------------------------------------------------------------------- attention layers

MHA_CASES = {
    'default': {'num_heads': 2},
    'features': {'num_heads': 3, 'qkv_features': 12, 'out_features': 5},
    'no-bias': {'num_heads': 2, 'use_bias': False},
    'normalize-qk': {'num_heads': 2, 'qkv_features': 8, 'normalize_qk': True},
    'out-inits': {
        'num_heads': 2,
        'out_kernel_init': jax.nn.initializers.normal(0.3),
        'out_bias_init': jax.nn.initializers.constant(0.1),
        'bias_init': jax.nn.initializers.constant(0.2),
    },
    'bf16-params': {'num_heads': 2, 'param_dtype': jnp.bfloat16},
    'bf16-compute': {'num_heads': 2, 'dtype': jnp.bfloat16},
    'fp32-softmax': {'num_heads': 2, 'dtype': jnp.bfloat16, 'force_fp32_for_softmax': True},
}


@pytest.mark.parametrize('case', sorted(MHA_CASES))
def test_multi_head_attention(case):
    kwargs = MHA_CASES[case]
    xq, xk, xv = _normal(0, (2, 4, 6)), _normal(1, (2, 5, 6)), _normal(2, (2, 5, 6))
    mask = ll.make_attention_mask(jnp.array([[1, 1, 1, 0], [1, 1, 1, 1]]), jnp.ones((2, 5)))
    ours = ll.MultiHeadDotProductAttention(**kwargs)
    theirs = fnn.MultiHeadDotProductAttention(**kwargs)
    v_ours = ours.init(KEYS[3], xq, xk, xv)
    v_theirs = theirs.init(KEYS[3], xq, xk, xv)
    assert_same_variables(v_ours, v_theirs)
    tol = 2e-2 if 'bf16' in case or 'fp32' in case else 1e-5
    assert_same_outputs(
        ours.apply(v_ours, xq, xk, xv, mask=mask),
        theirs.apply(v_theirs, xq, xk, xv, mask=mask),
        tol,
    )
    assert_same_outputs(ours.apply(v_ours, xq), theirs.apply(v_theirs, xq), tol)


def test_multi_head_attention_dropout_same_rng_stream():
    kwargs = {'num_heads': 2, 'dropout_rate': 0.4, 'deterministic': False}
    x = _normal(0, (2, 4, 6))
    ours, theirs = (
        ll.MultiHeadDotProductAttention(**kwargs),
        fnn.MultiHeadDotProductAttention(**kwargs),
    )
    rngs = {'params': KEYS[1], 'dropout': KEYS[2]}
    v_ours, v_theirs = ours.init(rngs, x), theirs.init(rngs, x)
    assert_same_variables(v_ours, v_theirs)
    assert_same_outputs(
        ours.apply(v_ours, x, rngs={'dropout': KEYS[4]}),
        theirs.apply(v_theirs, x, rngs={'dropout': KEYS[4]}),
        1e-5,
    )


def test_multi_head_attention_decode():
    kwargs = {'num_heads': 2, 'qkv_features': 8, 'decode': True}
    x = _normal(0, (2, 5, 4))
    ours, theirs = (
        ll.MultiHeadDotProductAttention(**kwargs),
        fnn.MultiHeadDotProductAttention(**kwargs),
    )
    v_ours, v_theirs = ours.init(KEYS[1], x), theirs.init(KEYS[1], x)
    assert_same_variables(v_ours, v_theirs)
    for t in range(5):
        y_ours, cache_ours = ours.apply(v_ours, x[:, t : t + 1], mutable=['cache'])
        y_theirs, cache_theirs = theirs.apply(v_theirs, x[:, t : t + 1], mutable=['cache'])
        assert_same_outputs(y_ours, y_theirs, 1e-5)
        assert_same_variables(cache_ours, cache_theirs, 1e-6, 1e-6)
        v_ours = {'params': v_ours['params'], **cache_ours}
        v_theirs = {'params': v_theirs['params'], **cache_theirs}


def test_multi_head_attention_sow_weights():
    x = _normal(0, (2, 4, 6))
    ours, theirs = ll.MultiHeadDotProductAttention(2), fnn.MultiHeadDotProductAttention(2)
    v = ours.init(KEYS[1], x)
    _, s_ours = ours.apply(v, x, sow_weights=True, mutable=['intermediates'])
    _, s_theirs = theirs.apply(
        theirs.init(KEYS[1], x), x, sow_weights=True, mutable=['intermediates']
    )
    assert_same_variables(
        {'w': s_ours['intermediates']['attention_weights'][0]},
        {'w': s_theirs['intermediates']['attention_weights'][0]},
        1e-6,
        1e-6,
    )


# Flax warns that its own SelfAttention will be deprecated; the oracle's warning is
# not ours (linen keeps the name without a warning, as a drop-in must).
@pytest.mark.filterwarnings('ignore:SelfAttention will be deprecated:DeprecationWarning')
@pytest.mark.parametrize('name', ['SelfAttention', 'MultiHeadAttention'])
def test_self_attention_and_alias(name):
    """Held by a parent, so the auto-name (``SelfAttention_0``...) is checked too."""
    ours_cls, theirs_cls = getattr(ll, name), getattr(fnn, name)

    class Ours(Module):
        @compact
        def __call__(self, x):
            return ours_cls(num_heads=2)(x)

    class Theirs(fnn.Module):
        @fnn.compact
        def __call__(self, x):
            return theirs_cls(num_heads=2)(x)

    x = _normal(0, (2, 4, 6))
    v_ours, v_theirs = Ours().init(KEYS[1], x), Theirs().init(KEYS[1], x)
    assert list(v_ours['params']) == [f'{name}_0']
    assert_same_variables(v_ours, v_theirs)
    assert_same_outputs(Ours().apply(v_ours, x), Theirs().apply(v_theirs, x), 1e-5)


# ----------------------------------------------------------------------------- cells

CELL_CASES = {
    'LSTMCell': ({'features': 4}, (2, 3)),
    'OptimizedLSTMCell': ({'features': 4}, (2, 3)),
    'GRUCell': ({'features': 4}, (2, 3)),
    'GRUCell-bias': ({'features': 4, 'bias_init': jax.nn.initializers.constant(0.3)}, (2, 3)),
    'MGUCell': ({'features': 4}, (2, 3)),
    'MGUCell-no-reset': ({'features': 4, 'reset_gate': False}, (2, 3)),
    'MGUCell-biases': (
        {
            'features': 4,
            'activation_bias_init': jax.nn.initializers.constant(0.5),
            'forget_bias_init': jax.nn.initializers.constant(-0.5),
        },
        (2, 3),
    ),
    'SimpleCell': ({'features': 4}, (2, 3)),
    'SimpleCell-residual': ({'features': 3, 'residual': True}, (2, 3)),
    'LSTMCell-bf16': ({'features': 4, 'dtype': jnp.bfloat16}, (2, 3)),
    'LSTMCell-batch2': ({'features': 4}, (2, 5, 3)),
    'ConvLSTMCell-1d': ({'features': 2, 'kernel_size': (3,)}, (2, 6, 3)),
    'ConvLSTMCell-2d': ({'features': 2, 'kernel_size': (3, 3), 'use_bias': False}, (2, 5, 5, 3)),
}


@pytest.mark.parametrize('case', sorted(CELL_CASES))
def test_cell(case):
    kwargs, in_shape = CELL_CASES[case]
    name = case.split('-')[0]
    ours, theirs = getattr(ll, name)(**kwargs), getattr(fnn, name)(**kwargs)
    assert ours.num_feature_axes == theirs.num_feature_axes
    x = _normal(0, in_shape)
    init = jax.nn.initializers.normal(1.0)
    carry_ours = type(ours)(**kwargs, carry_init=init).initialize_carry(KEYS[1], in_shape)
    carry_theirs = type(theirs)(**kwargs, carry_init=init).initialize_carry(KEYS[1], in_shape)
    assert_same_outputs(carry_ours, carry_theirs, 0)
    v_ours, v_theirs = ours.init(KEYS[2], carry_ours, x), theirs.init(KEYS[2], carry_theirs, x)
    assert_same_variables(v_ours, v_theirs)
    tol = 2e-2 if 'bf16' in case else 1e-5
    assert_same_outputs(
        ours.apply(v_ours, carry_ours, x), theirs.apply(v_theirs, carry_theirs, x), tol
    )


def _step_operations(jaxpr) -> list[str]:
    """The primitives of ``jaxpr`` in order, nested ``jit`` calls inlined."""
    from jax.extend import core as jex

    names = []
    for eqn in jaxpr.eqns:
        inner = [v for v in eqn.params.values() if isinstance(v, (jex.ClosedJaxpr, jex.Jaxpr))]
        if eqn.primitive.name in ('jit', 'pjit') and len(inner) == 1:
            names += _step_operations(getattr(inner[0], 'jaxpr', inner[0]))
        else:
            names.append(eqn.primitive.name)
    return names


@pytest.mark.parametrize('case', sorted(c for c in CELL_CASES if 'bf16' not in c))
def test_cell_step_is_flax_operation_for_operation(case):
    # The same sum in another order can round differently once XLA fuses it (fuzz
    # finding F23: OptimizedLSTMCell's gates, JAX 0.10): a cell's step issues Flax's
    # operations in Flax's order, and its outputs and gradients are Flax's bit for bit.
    kwargs, in_shape = CELL_CASES[case]
    name = case.split('-')[0]
    ours, theirs = getattr(ll, name)(**kwargs), getattr(fnn, name)(**kwargs)
    x = _normal(0, in_shape)
    carry_o = ours.initialize_carry(KEYS[1], in_shape)
    carry_t = theirs.initialize_carry(KEYS[1], in_shape)
    v_ours, v_theirs = ours.init(KEYS[2], carry_o, x), theirs.init(KEYS[2], carry_t, x)

    def step(cell):
        return lambda v, c, x: cell.apply(v, c, x)

    def grad(cell):
        loss = lambda v, c, x: sum(
            jnp.sum(y * y) for y in jax.tree_util.tree_leaves(cell.apply(v, c, x))
        )
        return jax.grad(loss)

    for fn in (step, grad):
        ops_ours = _step_operations(jax.make_jaxpr(fn(ours))(v_ours, carry_o, x).jaxpr)
        ops_theirs = _step_operations(jax.make_jaxpr(fn(theirs))(v_theirs, carry_t, x).jaxpr)
        assert ops_ours == ops_theirs, fn.__name__
        for a, b in zip(
            jax.tree_util.tree_leaves(jax.jit(fn(ours))(v_ours, carry_o, x)),
            jax.tree_util.tree_leaves(jax.jit(fn(theirs))(v_theirs, carry_t, x)),
        ):
            np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- RNN

RNN_CASES = {
    'lstm': ({}, {}),
    'gru-carry': ({'return_carry': True}, {}),
    'reverse': ({'reverse': True}, {}),
    'reverse-keep-order': ({'reverse': True, 'keep_order': True}, {}),
    'time-major': ({'time_major': True}, {}),
    'seq-lengths': ({'return_carry': True}, {'seq_lengths': jnp.array([2, 6, 4])}),
    'seq-lengths-reverse': (
        {'return_carry': True, 'reverse': True, 'keep_order': True},
        {'seq_lengths': jnp.array([2, 6, 4])},
    ),
    'init-key': ({}, {'init_key': KEYS[6]}),
    'unroll': ({'unroll': 3}, {}),
    'per-step-params': (
        {
            'variable_axes': {'params': 0},
            'variable_broadcast': False,
            'split_rngs': {'params': True},
        },
        {},
    ),
}


@pytest.mark.parametrize('case', sorted(RNN_CASES))
def test_rnn(case):
    attrs, call_kwargs = RNN_CASES[case]
    cell = 'GRUCell' if case.startswith('gru') else 'LSTMCell'
    carry_init = jax.nn.initializers.normal(1.0)
    ours = ll.RNN(getattr(ll, cell)(4, carry_init=carry_init), **attrs)
    theirs = fnn.RNN(getattr(fnn, cell)(4, carry_init=carry_init), **attrs)
    xs = _normal(0, (6, 3, 3) if attrs.get('time_major') else (3, 6, 3))
    v_ours = ours.init(KEYS[1], xs, **call_kwargs)
    v_theirs = theirs.init(KEYS[1], xs, **call_kwargs)
    assert_same_variables(v_ours, v_theirs)
    assert_same_outputs(
        ours.apply(v_ours, xs, **call_kwargs), theirs.apply(v_theirs, xs, **call_kwargs), 1e-5
    )


def test_bidirectional():
    ours = ll.Bidirectional(ll.RNN(ll.LSTMCell(4)), ll.RNN(ll.GRUCell(3)), return_carry=True)
    theirs = fnn.Bidirectional(fnn.RNN(fnn.LSTMCell(4)), fnn.RNN(fnn.GRUCell(3)), return_carry=True)
    xs = _normal(0, (3, 6, 2))
    lengths = jnp.array([6, 2, 4])
    v_ours = ours.init(KEYS[1], xs, seq_lengths=lengths)
    v_theirs = theirs.init(KEYS[1], xs, seq_lengths=lengths)
    assert_same_variables(v_ours, v_theirs)
    assert_same_outputs(
        ours.apply(v_ours, xs, seq_lengths=lengths),
        theirs.apply(v_theirs, xs, seq_lengths=lengths),
        1e-5,
    )


# seq_lengths that do not have the batch shape: Flax checks nothing and uses them as
# given (only the returned carry and a reverse run read them).
SEQ_LENGTHS_CASES = {
    'outputs_only': (dict(), (2, 5, 3), [5, 3, 2]),
    'reverse_keep_order_refused': (dict(reverse=True, keep_order=True), (2, 5, 3), [5, 3, 2]),
    'carry_one_length': (dict(return_carry=True), (2, 5, 3), [4]),
    'carry_row_of_lengths': (dict(return_carry=True), (2, 5, 3), [[4, 3]]),
    'carry_scalar_length_time_major': (dict(return_carry=True, time_major=True), (5, 2, 3), 3),
}


@pytest.mark.parametrize('case', list(SEQ_LENGTHS_CASES))
def test_rnn_seq_lengths_of_another_shape_as_flax(case):
    kwargs, shape, lengths = SEQ_LENGTHS_CASES[case]
    x = jax.random.normal(jax.random.key(2), shape)

    def run(nn):
        rnn = nn.RNN(nn.LSTMCell(4), **kwargs)
        variables = rnn.init(jax.random.key(0), x)
        try:
            return 'ok', rnn.apply(variables, x, seq_lengths=jnp.array(lengths))
        except ValueError as err:  # JAX's broadcasting error, in both
            return 'raises', type(err)

    (kind_ours, ours), (kind_theirs, theirs) = run(ll), run(fnn)
    assert kind_ours == kind_theirs == ('raises' if 'refused' in case else 'ok')
    if kind_ours == 'ok':
        assert_same_bits(ours, theirs)


CELLS = ['SimpleCell', 'GRUCell', 'MGUCell', 'LSTMCell', 'OptimizedLSTMCell']
# JAX's error where a scan step returns a carry of another type than it was given.
CARRY_TYPE_ERROR = 'carry input and carry output must have equal types'


@pytest.mark.parametrize('cell', CELLS)
def test_rnn_float64_inputs_run_as_flax_given_a_float64_carry(cell):
    # Flax's RNN builds a float32 carry, which a float64 step cannot keep: its scan
    # stops with a TypeError (docs/differences.md, "Accepted by linen, refused by
    # Flax"). linen widens the carry it builds; that is Flax's run given the carry.
    xs = _normal(0, (2, 5, 3))
    variables = ll.RNN(getattr(ll, cell)(4)).init(KEYS[1], xs)
    with jax.enable_x64(True):
        x64 = xs.astype(jnp.float64)
        with pytest.raises(TypeError, match=CARRY_TYPE_ERROR):
            fnn.RNN(getattr(fnn, cell)(4)).apply(variables, x64)
        ours = ll.RNN(getattr(ll, cell)(4), return_carry=True).apply(variables, x64)
        carry = getattr(fnn, cell)(4).initialize_carry(KEYS[2], xs[:, 0].shape)
        carry = jax.tree_util.tree_map(lambda c: c.astype(jnp.float64), carry)
        theirs = fnn.RNN(getattr(fnn, cell)(4), return_carry=True).apply(
            variables, x64, initial_carry=carry
        )
    assert_same_bits(ours, theirs)


@pytest.mark.parametrize('cell', CELLS)
def test_rnn_of_a_bfloat16_cell_as_flax(cell):
    # A cell computing in bfloat16 over RNN's float32 carry: the gated cells mix the
    # float32 carry back in and keep it float32, which Flax runs; SimpleCell returns a
    # bfloat16 carry, where Flax's scan stops and linen casts it back to float32, the
    # outputs those of Flax's run from a bfloat16 carry.
    xs = _normal(0, (2, 5, 3))
    ours = ll.RNN(getattr(ll, cell)(4, dtype=jnp.bfloat16), return_carry=True)
    theirs = fnn.RNN(getattr(fnn, cell)(4, dtype=jnp.bfloat16), return_carry=True)
    variables = ours.init(KEYS[1], xs)
    carry, ys = ours.apply(variables, xs)
    if cell != 'SimpleCell':
        assert_same_variables(variables, theirs.init(KEYS[1], xs))
        assert_same_bits((carry, ys), theirs.apply(variables, xs))
        return
    with pytest.raises(TypeError, match=CARRY_TYPE_ERROR):
        theirs.init(KEYS[1], xs)
    with pytest.raises(TypeError, match=CARRY_TYPE_ERROR):
        theirs.apply(variables, xs)
    start = jnp.zeros((2, 4), jnp.bfloat16)
    assert_same_variables(variables, theirs.init(KEYS[1], xs, initial_carry=start))
    their_carry, their_ys = theirs.apply(variables, xs, initial_carry=start)
    assert carry.dtype == jnp.float32
    assert_same_bits((carry.astype(jnp.bfloat16), ys), (their_carry, their_ys))


@pytest.mark.parametrize('depth', [2, 3, 4])
@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
def test_attention_in_64_bit_mode_as_flax(depth, jit):
    # The queries' scale sqrt(depth) is taken in JAX's default float type, float64 in
    # 64-bit mode, as Flax's jnp.sqrt takes it: eagerly linen computes it on the host,
    # which took it in float32 (1e-8 off Flax's for an inexact root, fuzz run x64b).
    def run(nn):
        mha = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=2 * depth)
        q, kv = _normal(0, (2, 5, 3), jnp.float64), _normal(1, (2, 4, 3), jnp.float64)
        variables = mha.init(KEYS[2], q, kv)
        apply = jax.jit(mha.apply) if jit else mha.apply
        heads = [_normal(3 + i, (2, 5, 2, depth), jnp.float64) for i in range(3)]
        attention = jax.jit(nn.dot_product_attention) if jit else nn.dot_product_attention
        return variables, apply(variables, q, kv), attention(*heads)

    with jax.enable_x64(True):
        ours, theirs = run(ll), run(fnn)
    assert ours[1].dtype == jnp.float64
    assert_same_bits(ours, theirs)
