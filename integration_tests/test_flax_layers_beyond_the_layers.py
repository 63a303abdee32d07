"""Flax as an oracle for the parts of the layer surface Flax code reaches for beyond
the plain layers.

Recurrent cells sized by their carry, ``Conv``'s circular/reflect/causal paddings,
``Einsum`` with ``...``, and the submodule namespaces (``nn.linear``, ...).
"""

from __future__ import annotations

import types
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
import pytest

fnn = pytest.importorskip('flax.linen')

import linen.layers as ll  # noqa: E402
import linen.nn as nn  # noqa: E402  (used by the namespace tests)

pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]

KEYS = jax.random.split(jax.random.key(11), 8)


def _flat(tree, prefix=''):
    out = {}
    for k, v in tree.items():
        path = f'{prefix}/{k}'
        if isinstance(v, Mapping):
            out.update(_flat(v, path))
        else:
            out[path] = np.asarray(v)
    return out


def assert_same_variables(ours, theirs):
    a, b = _flat(ours), _flat(theirs)
    assert sorted(a) == sorted(b)
    for path in a:
        assert a[path].shape == b[path].shape, path
        assert a[path].dtype == b[path].dtype, path
        np.testing.assert_array_equal(a[path], b[path], err_msg=path)


def assert_same_outputs(ours, theirs, tol):
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


# ----------------------------------------------------------------------------- cells

# A cell whose `features` differs from the carry it is given: Flax runs the step at
# the carry's size (its seq2seq example feeds LSTMCell(vocab_size) a hidden_size carry).
CARRY_CELLS = ['LSTMCell', 'OptimizedLSTMCell', 'GRUCell', 'MGUCell', 'SimpleCell']


@pytest.mark.parametrize('name', CARRY_CELLS)
def test_cell_takes_hidden_size_from_carry(name):
    ours, theirs = getattr(ll, name)(features=7), getattr(fnn, name)(features=7)
    x = _normal(0, (2, 3))
    carry = getattr(fnn, name)(features=5).initialize_carry(KEYS[1], x.shape)
    carry = jax.tree_util.tree_map(lambda c: c + _normal(2, c.shape), carry)
    v_ours, v_theirs = ours.init(KEYS[3], carry, x), theirs.init(KEYS[3], carry, x)
    assert_same_variables(v_ours, v_theirs)
    out_ours, out_theirs = ours.apply(v_ours, carry, x), theirs.apply(v_theirs, carry, x)
    assert out_ours[1].shape == (2, 5)
    assert_same_outputs(out_ours, out_theirs, 1e-5)
    # initialize_carry still uses `features`.
    assert_same_outputs(
        ours.initialize_carry(KEYS[4], x.shape), theirs.initialize_carry(KEYS[4], x.shape), 0
    )


def test_rnn_with_initial_carry_of_another_size():
    """The seq2seq pattern: a decoder RNN over a vocab-sized cell, hidden-size carry."""
    xs = _normal(0, (2, 4, 6))
    carry = fnn.LSTMCell(3).initialize_carry(KEYS[1], (2, 6))
    ours = ll.RNN(ll.LSTMCell(6), return_carry=True)
    theirs = fnn.RNN(fnn.LSTMCell(6), return_carry=True)
    v_ours = ours.init(KEYS[2], xs, initial_carry=carry)
    v_theirs = theirs.init(KEYS[2], xs, initial_carry=carry)
    assert_same_variables(v_ours, v_theirs)
    assert_same_outputs(
        ours.apply(v_ours, xs, initial_carry=carry),
        theirs.apply(v_theirs, xs, initial_carry=carry),
        1e-5,
    )


def test_conv_lstm_hidden_channels_from_carry():
    ours, theirs = ll.ConvLSTMCell(2, (3,)), fnn.ConvLSTMCell(2, (3,))
    x = _normal(0, (2, 5, 3))
    c = _normal(1, (2, 5, 2))
    h = _normal(2, (2, 5, 4))  # h's channels only feed the `hh` convolution
    v_ours, v_theirs = ours.init(KEYS[3], (c, h), x), theirs.init(KEYS[3], (c, h), x)
    assert_same_variables(v_ours, v_theirs)
    assert_same_outputs(ours.apply(v_ours, (c, h), x), theirs.apply(v_theirs, (c, h), x), 1e-5)


def test_carry_flax_leaves_undefined_raises():
    x = _normal(0, (2, 3))
    with pytest.raises(ll.errors.RNNCarryShapeError, match=r'c and h must have the same'):
        ll.LSTMCell(4).init(KEYS[0], (jnp.zeros((2, 4)), jnp.zeros((2, 5))), x)
    with pytest.raises(ll.errors.RNNCarryShapeError, match=r'features=2'):
        ll.ConvLSTMCell(2, (3,)).init(
            KEYS[0], (jnp.zeros((2, 5, 3)), jnp.zeros((2, 5, 2))), jnp.zeros((2, 5, 3))
        )


# ----------------------------------------------------------------------------- conv padding

PADDING_CASES = {
    'circular-2d': ('Conv', {'kernel_size': (3, 2), 'padding': 'CIRCULAR'}, (2, 5, 6, 3)),
    'circular-dilated': (
        'Conv',
        {'kernel_size': (3,), 'padding': 'CIRCULAR', 'kernel_dilation': 2},
        (2, 7, 3),
    ),
    'reflect-2d': ('Conv', {'kernel_size': (3, 4), 'padding': 'REFLECT'}, (2, 5, 6, 3)),
    'reflect-strided-unbatched': (
        'Conv',
        {'kernel_size': (3,), 'padding': 'REFLECT', 'strides': 2},
        (7, 3),
    ),
    'causal': ('Conv', {'kernel_size': (3,), 'padding': 'CAUSAL'}, (2, 6, 3)),
    'causal-dilated-2batch': (
        'Conv',
        {'kernel_size': (2,), 'padding': 'CAUSAL', 'kernel_dilation': 3},
        (2, 2, 6, 3),
    ),
    'local-reflect': ('ConvLocal', {'kernel_size': (3,), 'padding': 'REFLECT'}, (2, 6, 3)),
    'local-circular': ('ConvLocal', {'kernel_size': (2, 2), 'padding': 'CIRCULAR'}, (2, 4, 4, 3)),
    'local-causal': ('ConvLocal', {'kernel_size': (3,), 'padding': 'CAUSAL'}, (2, 6, 3)),
    'transpose-circular': (
        'ConvTranspose',
        {'kernel_size': (3,), 'padding': 'CIRCULAR', 'strides': 2},
        (2, 5, 3),
    ),
    # lax reads its own padding strings in any case, so Flax's layers take 'same'.
    'lowercase-same': ('Conv', {'kernel_size': (3, 2), 'padding': 'same'}, (2, 5, 6, 3)),
    'lowercase-same-lower': (
        'Conv',
        {'kernel_size': (4,), 'padding': 'same_lower', 'strides': 2},
        (2, 7, 3),
    ),
    'lowercase-valid-local': ('ConvLocal', {'kernel_size': (3,), 'padding': 'valid'}, (2, 6, 3)),
    # (a strided 'same' goes to lax as written, which then refuses it on both sides)
    'lowercase-same-lower-transpose': (
        'ConvTranspose',
        {'kernel_size': (3,), 'padding': 'same_lower'},
        (2, 5, 3),
    ),
}


@pytest.mark.parametrize('case', sorted(PADDING_CASES))
def test_conv_padding_matches_flax(case):
    name, kwargs, shape = PADDING_CASES[case]
    ours, theirs = getattr(ll, name)(4, **kwargs), getattr(fnn, name)(4, **kwargs)
    x = _normal(0, shape)
    y_ours, v_ours = ours.init_with_output(KEYS[1], x)
    y_theirs, v_theirs = theirs.init_with_output(KEYS[1], x)
    assert_same_variables(v_ours, v_theirs)
    assert_same_outputs(y_ours, y_theirs, 1e-5)


@pytest.mark.parametrize('padding', ['REFLECT', 'CAUSAL'])
def test_conv_transpose_rejects_paddings_flax_lacks(padding):
    with pytest.raises(ll.errors.LayerPaddingError, match=f'{padding}.*transposed'):
        ll.ConvTranspose(2, (3,), padding=padding).init(KEYS[0], jnp.ones((1, 5, 2)))


def test_batch_apply_merges_each_argument_on_its_own_as_flax():
    # Flax compares no leading shapes: (2, 3) and (3, 2) both merge to 6 rows.
    a, b = _normal(0, (2, 3, 4)), _normal(1, (3, 2, 4))
    ours = ll.BatchApply(lambda a, b: a * b)(a, b)
    theirs = fnn.BatchApply(lambda a, b: a * b)(a, b)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


# ----------------------------------------------------------------------------- einsum

EINSUM_CASES = {
    'lhs-ellipsis': ((3, 4), '...a,ab->...b', (2, 5, 3)),
    'lhs-ellipsis-unbatched': ((3, 4), '...a,ab->...b', (3,)),
    'both-ellipsis': ((2, 3, 4), '...a,...ab->...b', (5, 2, 3)),
    'kernel-ellipsis': ((5, 3, 4), 'na,...ab->n...b', (2, 3)),
    'middle': ((3, 2, 4), 'b...h,hkd->b...kd', (2, 6, 7, 3)),
    'spaces': ((3, 4), '... a , a b -> ... b', (2, 3)),
}


@pytest.mark.parametrize('case', sorted(EINSUM_CASES))
@pytest.mark.parametrize('use_bias', [True, False])
def test_einsum_ellipsis_matches_flax(case, use_bias):
    shape, equation, in_shape = EINSUM_CASES[case]
    ours = ll.Einsum(shape, equation, use_bias=use_bias, bias_init=jax.nn.initializers.normal())
    theirs = fnn.Einsum(shape, equation, use_bias=use_bias, bias_init=jax.nn.initializers.normal())
    x = _normal(0, in_shape)
    y_ours, v_ours = ours.init_with_output(KEYS[1], x)
    y_theirs, v_theirs = theirs.init_with_output(KEYS[1], x)
    assert_same_variables(v_ours, v_theirs)
    assert_same_outputs(y_ours, y_theirs, 1e-5)


@pytest.mark.parametrize(
    'equation,match',
    [('....a,ab->b', 'not of the form'), ('a..b,bc->ac', 'not of the form')],
)
def test_einsum_bad_ellipsis(equation, match):
    with pytest.raises(ll.errors.LayerArgumentError, match=match):
        ll.Einsum((3, 4), equation).init(KEYS[0], jnp.ones((2, 3)))


def test_einsum_ellipsis_rank_error():
    with pytest.raises(ll.errors.LayerInputRankError, match='Match the equation'):
        ll.Einsum((3, 4), 'xy...a,ab->...b').init(KEYS[0], jnp.ones((3,)))


# ----------------------------------------------------------------------------- namespaces

# The submodules both facades offer (``nn.linear``, ``nn.spmd``, ...), but for the
# packages behind them (``nn.meta``, ``nn.module``, ``nn.transforms``), which are
# linen's own distributions and modules rather than namespaces copied from Flax.
NAMESPACES = [
    n
    for n in dir(nn)
    if isinstance(getattr(nn, n), types.ModuleType)
    and isinstance(getattr(fnn, n, None), types.ModuleType)
    and n not in ('meta', 'module', 'transforms')
]

# nn.spmd also holds the rule setters Flax keeps in flax.core.spmd, and linen's
# strict-rules switch and its warning class.
NAMESPACE_EXTRAS = {
    'spmd': [
        'LogicalAxisRulesWarning',
        'logical_axis_rules',
        'set_logical_axis_rules',
        'strict_logical_rules',
    ]
}


@pytest.mark.parametrize('namespace', NAMESPACES)
def test_namespace_mirrors_flax(namespace):
    ours, theirs = getattr(nn, namespace), getattr(fnn, namespace)
    assert ours.__all__, namespace
    # Everything we put in a namespace is where Flax has it, so imports carry over
    # (nn.spmd also holds the rule setters Flax keeps in flax.core.spmd).
    extras = [n for n in ours.__all__ if not hasattr(theirs, n)]
    assert extras == NAMESPACE_EXTRAS.get(namespace, [])
    # And every name Flax defines there, that linen.nn offers at the top, is there too.
    flax_defined = [
        n
        for n, v in vars(theirs).items()
        if not n.startswith('_')
        and (getattr(v, '__module__', None) or '') == theirs.__name__
        and n in dir(nn)
    ]
    assert [n for n in flax_defined if n not in ours.__all__] == []
    # The same object as at the top wherever Flax's is (Flax's partitioning.remat is its
    # own function, not nn.remat).
    for n in flax_defined:
        if getattr(theirs, n) is getattr(fnn, n, None):
            assert getattr(ours, n) is getattr(nn, n), n


def test_namespace_default_initializers_match_flax():
    for name in ('default_kernel_init', 'default_embed_init'):
        ours, theirs = getattr(nn.linear, name), getattr(fnn.linear, name)
        np.testing.assert_array_equal(ours(KEYS[0], (3, 4)), theirs(KEYS[0], (3, 4)))


@pytest.mark.parametrize('padding', ['SAME', 'CIRCULAR', 2, [1, (0, 2)], ((1, 2), (3, 4))])
def test_canonicalize_padding_matches_flax(padding):
    assert nn.linear.canonicalize_padding(padding, 2) == fnn.linear.canonicalize_padding(padding, 2)


def test_canonicalize_padding_rejects_like_flax():
    with pytest.raises(ValueError):
        fnn.linear.canonicalize_padding([1, 2, 3], 2)
    with pytest.raises(ll.errors.LayerPaddingError, match='3 entries for 2 spatial'):
        nn.linear.canonicalize_padding([1, 2, 3], 2)
