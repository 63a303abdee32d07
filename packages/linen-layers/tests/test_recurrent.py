"""Recurrent cells, RNN and Bidirectional against hand-written JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from linen.layers._recurrent import (
    ConvLSTMCell,
    GRUCell,
    LSTMCell,
    MGUCell,
    OptimizedLSTMCell,
    RNNCellBase,
    SimpleCell,
)
from linen.layers._rnn import RNN, Bidirectional
from linen.layers.errors import RNNCarryShapeError, RNNInputShapeError

KEYS = jax.random.split(jax.random.key(7), 8)
sigmoid = jax.nn.sigmoid


def _normal(i, shape, dtype=jnp.float32):
    return jax.random.normal(KEYS[i], shape, dtype)


def _perturbed(params):
    # Biases start at zero; shift every parameter so the references exercise them.
    return jax.tree_util.tree_map(lambda p: p + 0.05, params)


def _dense(p, name, x):
    d = p[name]
    y = x @ d['kernel']
    return y + d['bias'].reshape((1,) * (y.ndim - 1) + d['bias'].shape) if 'bias' in d else y


# ----------------------------------------------------------------------------- references


def ref_lstm(p, carry, x):
    c, h = carry
    i = sigmoid(_dense(p, 'ii', x) + _dense(p, 'hi', h))
    f = sigmoid(_dense(p, 'if', x) + _dense(p, 'hf', h))
    g = jnp.tanh(_dense(p, 'ig', x) + _dense(p, 'hg', h))
    o = sigmoid(_dense(p, 'io', x) + _dense(p, 'ho', h))
    c = f * c + i * g
    h = o * jnp.tanh(c)
    return (c, h), h


def ref_gru(p, h, x):
    r = sigmoid(_dense(p, 'ir', x) + _dense(p, 'hr', h))
    z = sigmoid(_dense(p, 'iz', x) + _dense(p, 'hz', h))
    n = jnp.tanh(_dense(p, 'in', x) + r * _dense(p, 'hn', h))
    h = (1 - z) * n + z * h
    return h, h


def ref_mgu(p, h, x, reset_gate=True):
    f = sigmoid(_dense(p, 'if', x) + _dense(p, 'hf', h))
    recurrent = _dense(p, 'hn', h)
    n = jnp.tanh(_dense(p, 'in', x) + (f * recurrent if reset_gate else recurrent))
    h = (1 - f) * n + f * h
    return h, h


def ref_simple(p, h, x, residual=False):
    pre = _dense(p, 'i', x) + _dense(p, 'h', h) + (h if residual else 0)
    h = jnp.tanh(pre)
    return h, h


def ref_conv_lstm(p, carry, x):
    c, h = carry

    def conv(d, inp):
        nd = inp.ndim - 2
        y = lax.conv_general_dilated(
            inp,
            d['kernel'],
            (1,) * nd,
            'SAME',
            dimension_numbers=lax.conv_dimension_numbers(
                inp.shape,
                d['kernel'].shape,
                ('NHC', 'HIO', 'NHC') if nd == 1 else ('NHWC', 'HWIO', 'NHWC'),
            ),
        )
        return y + d['bias'].reshape((1,) * (y.ndim - 1) + d['bias'].shape)

    gates = conv(p['ih'], x) + conv(p['hh'], h)
    i, g, f, o = jnp.split(gates, 4, axis=-1)
    c = sigmoid(f + 1) * c + sigmoid(i) * jnp.tanh(g)
    h = sigmoid(o) * jnp.tanh(c)
    return (c, h), h


def _close(a, b, tol=1e-5):
    jax.tree_util.tree_map(lambda x, y: np.testing.assert_allclose(x, y, rtol=tol, atol=tol), a, b)


# ----------------------------------------------------------------------------- cells

CELL_CASES = [
    (
        'LSTMCell',
        lambda: LSTMCell(4),
        ref_lstm,
        {'hi': (4, 4), 'hf': (4, 4), 'hg': (4, 4), 'ho': (4, 4)},
        {'ii': (3, 4), 'if': (3, 4), 'ig': (3, 4), 'io': (3, 4)},
    ),
    (
        'OptimizedLSTMCell',
        lambda: OptimizedLSTMCell(4),
        ref_lstm,
        {'hi': (4, 4), 'hf': (4, 4), 'hg': (4, 4), 'ho': (4, 4)},
        {'ii': (3, 4), 'if': (3, 4), 'ig': (3, 4), 'io': (3, 4)},
    ),
    (
        'GRUCell',
        lambda: GRUCell(4),
        ref_gru,
        {'ir': (3, 4), 'iz': (3, 4), 'in': (3, 4), 'hn': (4, 4)},
        {'hr': (4, 4), 'hz': (4, 4)},
    ),
    (
        'MGUCell',
        lambda: MGUCell(4),
        ref_mgu,
        {'if': (3, 4), 'in': (3, 4), 'hn': (4, 4)},
        {'hf': (4, 4)},
    ),
    (
        'MGUCell-no-reset',
        lambda: MGUCell(4, reset_gate=False),
        lambda p, h, x: ref_mgu(p, h, x, reset_gate=False),
        {'if': (3, 4), 'in': (3, 4)},
        {'hf': (4, 4), 'hn': (4, 4)},
    ),
    ('SimpleCell', lambda: SimpleCell(4), ref_simple, {'i': (3, 4)}, {'h': (4, 4)}),
    (
        'SimpleCell-residual',
        lambda: SimpleCell(4, residual=True),
        lambda p, h, x: ref_simple(p, h, x, residual=True),
        {'i': (3, 4)},
        {'h': (4, 4)},
    ),
]


@pytest.mark.parametrize(
    'make, ref, with_bias, without_bias',
    [c[1:] for c in CELL_CASES],
    ids=[c[0] for c in CELL_CASES],
)
def test_cell_params_and_step(make, ref, with_bias, without_bias):
    cell = make()
    x = _normal(0, (2, 3))
    carry = jax.tree_util.tree_map(
        lambda a: jax.random.normal(KEYS[1], a.shape), cell.initialize_carry(KEYS[2], x.shape)
    )
    variables = cell.init(KEYS[3], carry, x)
    shapes = jax.tree_util.tree_map(jnp.shape, dict(variables['params']))
    expected = {n: {'kernel': s, 'bias': (s[1],)} for n, s in with_bias.items()}
    expected.update({n: {'kernel': s} for n, s in without_bias.items()})
    assert shapes == expected
    params = _perturbed(variables['params'])
    new_carry, out = cell.apply({'params': params}, carry, x)
    ref_carry, ref_out = ref(params, carry, x)
    _close(new_carry, ref_carry)
    _close(out, ref_out)


def test_lstm_initial_bias_zero_and_mgu_forget_bias_one():
    x = jnp.ones((2, 3))
    h = jnp.zeros((2, 4))
    lstm = LSTMCell(4).init(KEYS[0], (h, h), x)['params']
    np.testing.assert_array_equal(lstm['hf']['bias'], np.zeros(4))
    mgu = MGUCell(4).init(KEYS[0], h, x)['params']
    np.testing.assert_array_equal(mgu['if']['bias'], np.ones(4))
    np.testing.assert_array_equal(mgu['in']['bias'], np.zeros(4))
    # Recurrent kernels are orthogonal by default.
    k = np.asarray(lstm['hi']['kernel'])
    np.testing.assert_allclose(k.T @ k, np.eye(4), atol=1e-5)


def test_optimized_lstm_same_params_as_lstm():
    x = _normal(0, (2, 3))
    carry = LSTMCell(4).initialize_carry(KEYS[1], x.shape)
    a = LSTMCell(4).init(KEYS[2], carry, x)
    b = OptimizedLSTMCell(4).init(KEYS[2], carry, x)
    jax.tree_util.tree_map(np.testing.assert_array_equal, a, b)


@pytest.mark.parametrize('ndim', [1, 2])
def test_conv_lstm(ndim):
    cell = ConvLSTMCell(features=4, kernel_size=(3,) * ndim)
    assert cell.num_feature_axes == ndim + 1
    spatial = (6,) * ndim
    x = _normal(0, (2, *spatial, 3))
    c, h = cell.initialize_carry(KEYS[1], x.shape)
    assert c.shape == h.shape == (2, *spatial, 4)
    carry = (_normal(2, c.shape), _normal(3, h.shape))
    variables = cell.init(KEYS[4], carry, x)
    shapes = jax.tree_util.tree_map(jnp.shape, dict(variables['params']))
    k = (3,) * ndim
    assert shapes == {
        'ih': {'kernel': (*k, 3, 16), 'bias': (16,)},
        'hh': {'kernel': (*k, 4, 16), 'bias': (16,)},
    }
    params = _perturbed(variables['params'])
    new_carry, out = cell.apply({'params': params}, carry, x)
    ref_carry, ref_out = ref_conv_lstm(params, carry, x)
    _close(new_carry, ref_carry, 1e-4)
    _close(out, ref_out, 1e-4)


@pytest.mark.parametrize('cls', [LSTMCell, OptimizedLSTMCell, GRUCell, MGUCell, SimpleCell])
def test_initialize_carry(cls):
    init = jax.nn.initializers.normal(1.0)
    cell = cls(3, carry_init=init, param_dtype=jnp.bfloat16)
    assert cell.num_feature_axes == 1
    carry = cell.initialize_carry(KEYS[0], (2, 5, 7))
    if cls in (LSTMCell, OptimizedLSTMCell):
        key_c, key_h = jax.random.split(KEYS[0])
        np.testing.assert_array_equal(carry[0], init(key_c, (2, 5, 3), jnp.bfloat16))
        np.testing.assert_array_equal(carry[1], init(key_h, (2, 5, 3), jnp.bfloat16))
    else:
        np.testing.assert_array_equal(carry, init(KEYS[0], (2, 5, 3), jnp.bfloat16))
    zeros = cls(3).initialize_carry(KEYS[0], (2, 7))
    for leaf in jax.tree_util.tree_leaves(zeros):
        assert leaf.shape == (2, 3) and leaf.dtype == jnp.float32 and not leaf.any()


def test_cell_base_is_abstract():
    with pytest.raises(NotImplementedError):
        RNNCellBase().initialize_carry(KEYS[0], (2, 3))


@pytest.mark.parametrize('cls', [LSTMCell, OptimizedLSTMCell, GRUCell, MGUCell, SimpleCell])
def test_cell_dtypes(cls):
    x = _normal(0, (2, 3))
    # LAPACK has no bfloat16 QR, so the orthogonal default cannot make bfloat16 params on CPU.
    cell = cls(
        4, param_dtype=jnp.bfloat16, recurrent_kernel_init=jax.nn.initializers.lecun_normal()
    )
    carry = cell.initialize_carry(KEYS[1], x.shape)
    variables = cell.init(KEYS[2], carry, x)
    assert all(p.dtype == jnp.bfloat16 for p in jax.tree_util.tree_leaves(variables))
    cell16 = cls(4, dtype=jnp.bfloat16)
    carry = cell16.initialize_carry(KEYS[1], x.shape)
    variables = cell16.init(KEYS[2], carry, x)
    assert all(p.dtype == jnp.float32 for p in jax.tree_util.tree_leaves(variables))
    # The gates compute in bfloat16; a float32 carry would promote the update back.
    carry16 = jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16), carry)
    new_carry, out = cell16.apply(variables, carry16, x)
    assert out.dtype == jnp.bfloat16
    assert all(c.dtype == jnp.bfloat16 for c in jax.tree_util.tree_leaves(new_carry))
    _, out = cls(4).apply(variables, carry, x.astype(jnp.bfloat16))
    # bfloat16 inputs with float32 params compute in float32, as in Flax.
    assert out.dtype == jnp.float32


@pytest.mark.parametrize('cls', [LSTMCell, OptimizedLSTMCell])
def test_cell_carry_shape_error(cls):
    x = jnp.ones((2, 3))
    bad = (jnp.zeros((2, 4)), jnp.zeros((2, 5)))
    with pytest.raises(RNNCarryShapeError, match=r'LSTMCell.*\(2, 4\) and \(2, 5\).*same last'):
        cls(4).init(KEYS[0], bad, x)
    bad = (jnp.zeros((2, 5, 3)), jnp.zeros((2, 5, 2)))
    with pytest.raises(RNNCarryShapeError, match=r'ConvLSTMCell.*\(2, 5, 3\).*features=2'):
        ConvLSTMCell(2, (3,)).init(KEYS[0], bad, jnp.zeros((2, 5, 3)))


def test_carry_errors_pickle():
    import pickle

    for err in (RNNCarryShapeError('LSTMCell', 'bad'), RNNInputShapeError('RNN', 'bad')):
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and str(again) == str(err)


@pytest.mark.parametrize('cls', [LSTMCell, OptimizedLSTMCell, GRUCell, MGUCell, SimpleCell])
def test_cell_runs_at_the_carry_size(cls):
    # As in Flax: `features` sizes initialize_carry only; a step runs at the carry's size.
    x = _normal(0, (2, 3))
    carry = cls(5).initialize_carry(KEYS[1], x.shape)
    variables = cls(9).init(KEYS[2], carry, x)
    kernels = [p for p in jax.tree_util.tree_leaves(variables) if p.ndim == 2]
    assert kernels and all(k.shape[-1] == 5 for k in kernels)
    new_carry, y = cls(9).apply(variables, carry, x)
    assert y.shape == (2, 5)
    assert jax.tree_util.tree_map(jnp.shape, new_carry) == jax.tree_util.tree_map(jnp.shape, carry)


# ----------------------------------------------------------------------------- RNN


def _loop(cell_ref, params, carry, xs, time_axis):
    """Unrolled Python loop over time: the reference for RNN."""
    outs = []
    for t in range(xs.shape[time_axis]):
        carry, y = cell_ref(params, carry, jnp.take(xs, t, axis=time_axis))
        outs.append(y)
    return carry, jnp.stack(outs, axis=time_axis)


def test_rnn_param_tree_and_outputs():
    rnn = RNN(LSTMCell(4), return_carry=True)
    xs = _normal(0, (2, 5, 3))
    variables = rnn.init(KEYS[1], xs)
    assert set(variables['params']) == {'cell'}
    assert jax.tree_util.tree_map(jnp.shape, dict(variables['params']['cell']['ii'])) == {
        'kernel': (3, 4)
    }
    params = _perturbed(variables['params'])
    carry, ys = rnn.apply({'params': params}, xs)
    zeros = (jnp.zeros((2, 4)), jnp.zeros((2, 4)))
    ref_carry, ref_ys = _loop(ref_lstm, params['cell'], zeros, xs, 1)
    assert ys.shape == (2, 5, 4)
    _close(ys, ref_ys)
    _close(carry, ref_carry)


def test_rnn_time_major_initial_carry_and_unroll():
    rnn = RNN(GRUCell(4), time_major=True, unroll=2)
    xs = _normal(0, (5, 2, 3))
    h0 = _normal(1, (2, 4))
    variables = rnn.init(KEYS[2], xs, initial_carry=h0)
    params = _perturbed(variables['params'])
    ys = rnn.apply({'params': params}, xs, initial_carry=h0)
    _, ref_ys = _loop(ref_gru, params['cell'], h0, xs, 0)
    _close(ys, ref_ys)


def test_rnn_init_key_feeds_initialize_carry():
    init = jax.nn.initializers.normal(1.0)
    rnn = RNN(SimpleCell(4, carry_init=init))
    xs = _normal(0, (2, 5, 3))
    variables = rnn.init(KEYS[1], xs)
    params = _perturbed(variables['params'])
    ys = rnn.apply({'params': params}, xs, init_key=KEYS[3])
    _, ref_ys = _loop(ref_simple, params['cell'], init(KEYS[3], (2, 4)), xs, 1)
    _close(ys, ref_ys)
    # Without init_key the carry comes from random.key(0).
    ys0 = rnn.apply({'params': params}, xs)
    _, ref0 = _loop(ref_simple, params['cell'], init(jax.random.key(0), (2, 4)), xs, 1)
    _close(ys0, ref0)


@pytest.mark.parametrize('keep_order', [False, True])
def test_rnn_reverse(keep_order):
    rnn = RNN(SimpleCell(4), reverse=True, keep_order=keep_order)
    xs = _normal(0, (2, 5, 3))
    variables = rnn.init(KEYS[1], xs)
    params = _perturbed(variables['params'])
    ys = rnn.apply({'params': params}, xs)
    _, ref_ys = _loop(ref_simple, params['cell'], jnp.zeros((2, 4)), xs[:, ::-1], 1)
    _close(ys, ref_ys[:, ::-1] if keep_order else ref_ys)


def test_rnn_seq_lengths_carry_and_reverse():
    rnn = RNN(GRUCell(4), return_carry=True)
    xs = _normal(0, (3, 6, 3))
    lengths = jnp.array([2, 6, 4])
    variables = rnn.init(KEYS[1], xs)
    params = _perturbed(variables['params'])
    carry, ys = rnn.apply({'params': params}, xs, seq_lengths=lengths)
    for b, n in enumerate([2, 6, 4]):
        ref_carry, ref_ys = _loop(ref_gru, params['cell'], jnp.zeros((1, 4)), xs[b : b + 1, :n], 1)
        _close(carry[b : b + 1], ref_carry)
        _close(ys[b : b + 1, :n], ref_ys)
    # Reverse with lengths reads each sequence's valid steps backwards.
    carry, ys = rnn.apply(
        {'params': params}, xs, seq_lengths=lengths, reverse=True, keep_order=True
    )
    for b, n in enumerate([2, 6, 4]):
        ref_carry, ref_ys = _loop(
            ref_gru, params['cell'], jnp.zeros((1, 4)), xs[b : b + 1, :n][:, ::-1], 1
        )
        _close(carry[b : b + 1], ref_carry)
        _close(ys[b : b + 1, :n], ref_ys[:, ::-1])


def test_rnn_conv_cell():
    rnn = RNN(ConvLSTMCell(2, (3,)))
    xs = _normal(0, (2, 4, 6, 3))  # batch, time, width, channels
    variables = rnn.init(KEYS[1], xs)
    ys = rnn.apply(variables, xs)
    zeros = (jnp.zeros((2, 6, 2)), jnp.zeros((2, 6, 2)))
    _, ref_ys = _loop(ref_conv_lstm, variables['params']['cell'], zeros, xs, 1)
    _close(ys, ref_ys, 1e-4)


def test_rnn_input_errors():
    rnn = RNN(LSTMCell(4))
    with pytest.raises(RNNInputShapeError, match=r'inputs of shape \(3,\) have no time axis'):
        rnn.init(KEYS[0], jnp.ones((3,)))


def test_bidirectional():
    bi = Bidirectional(RNN(LSTMCell(4)), RNN(GRUCell(3)), return_carry=True)
    xs = _normal(0, (2, 5, 3))
    variables = bi.init(KEYS[1], xs)
    assert set(variables['params']) == {'forward_rnn', 'backward_rnn'}
    params = _perturbed(variables['params'])
    (carry_fw, carry_bw), ys = bi.apply({'params': params}, xs)
    zeros4 = (jnp.zeros((2, 4)), jnp.zeros((2, 4)))
    ref_fw_carry, ref_fw = _loop(ref_lstm, params['forward_rnn']['cell'], zeros4, xs, 1)
    ref_bw_carry, ref_bw = _loop(
        ref_gru, params['backward_rnn']['cell'], jnp.zeros((2, 3)), xs[:, ::-1], 1
    )
    assert ys.shape == (2, 5, 7)
    _close(ys, jnp.concatenate([ref_fw, ref_bw[:, ::-1]], axis=-1))
    _close(carry_fw, ref_fw_carry)
    _close(carry_bw, ref_bw_carry)


def test_intro_lstm_scan_example():
    """The example of Flax's Linen introduction: nn.scan over LSTMCell with broadcast params."""
    from linen.module import Module, compact
    from linen.transforms import scan

    class SimpleScan(Module):
        features: int

        @compact
        def __call__(self, xs):
            lstm_cls = scan(
                LSTMCell,
                in_axes=1,
                out_axes=1,
                variable_broadcast='params',
                split_rngs={'params': False},
            )
            lstm = lstm_cls(self.features, name='lstm_cell')
            dummy_rng = jax.random.key(0)
            input_shape = xs[:, 0].shape
            init_carry = lstm.initialize_carry(dummy_rng, input_shape)
            return lstm(init_carry, xs)

    xs = jax.random.uniform(KEYS[0], (1, 5, 2))
    model = SimpleScan(2)
    variables = model.init(KEYS[1], xs)
    shapes = jax.tree_util.tree_map(jnp.shape, dict(variables['params']['lstm_cell']))
    assert shapes['ii'] == {'kernel': (2, 2)} and shapes['hi'] == {'kernel': (2, 2), 'bias': (2,)}
    carry, ys = model.apply(variables, xs)
    zeros = (jnp.zeros((1, 2)), jnp.zeros((1, 2)))
    ref_carry, ref_ys = _loop(ref_lstm, variables['params']['lstm_cell'], zeros, xs, 1)
    _close(ys, ref_ys)
    _close(carry, ref_carry)


def test_rnn_bfloat16_cell_keeps_the_carry_dtype():
    # SimpleCell(dtype=bfloat16) returns a bfloat16 carry for a float32 one; the scan needs
    # one carry type, so the step's carry is cast back (Flax stops with a scan type error).
    rnn = RNN(SimpleCell(4, dtype=jnp.bfloat16), return_carry=True)
    xs = _normal(0, (2, 5, 3))
    variables = rnn.init(KEYS[1], xs)
    carry, ys = rnn.apply(variables, xs)
    assert carry.dtype == jnp.float32 and ys.dtype == jnp.bfloat16
    _, ref_ys = _loop(ref_simple, variables['params']['cell'], jnp.zeros((2, 4)), xs, 1)
    np.testing.assert_allclose(np.asarray(ys, np.float32), ref_ys, rtol=5e-2, atol=5e-2)


def test_rnn_float64_inputs_get_a_float64_carry():
    rnn = RNN(LSTMCell(4), return_carry=True)
    xs = _normal(0, (2, 5, 3))
    variables = rnn.init(KEYS[1], xs)
    with jax.enable_x64(True):
        (c, h), ys = rnn.apply(variables, xs.astype(jnp.float64))
        assert c.dtype == h.dtype == ys.dtype == jnp.float64
    zeros = (jnp.zeros((2, 4)), jnp.zeros((2, 4)))
    _, ref_ys = _loop(ref_lstm, variables['params']['cell'], zeros, xs, 1)
    _close(ys, ref_ys)


def test_rnn_per_step_params():
    rnn = RNN(
        SimpleCell(4),
        variable_axes={'params': 0},
        variable_broadcast=False,
        split_rngs={'params': True},
    )
    xs = _normal(0, (2, 5, 3))
    variables = rnn.init(KEYS[1], xs)
    kernels = variables['params']['cell']['h']['kernel']
    assert kernels.shape == (5, 4, 4)
    assert not np.allclose(kernels[0], kernels[1])
    ys = rnn.apply(variables, xs)
    h = jnp.zeros((2, 4))
    for t in range(5):
        step_params = jax.tree_util.tree_map(lambda p, t=t: p[t], variables['params']['cell'])
        h, y = ref_simple(step_params, h, xs[:, t])
        _close(ys[:, t], y)
