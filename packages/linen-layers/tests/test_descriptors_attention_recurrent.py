"""The attention and recurrent layers through the descriptor harness.

Each row runs init, abstract_init, apply, jit, vmap, remat, float64 and bfloat16 (``_testing.CHECKS``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from linen.layers import (
    RNN,
    Bidirectional,
    ConvLSTMCell,
    GRUCell,
    LSTMCell,
    MGUCell,
    MultiHeadAttention,
    MultiHeadDotProductAttention,
    OptimizedLSTMCell,
    SelfAttention,
    SimpleCell,
    make_causal_mask,
)
from linen.layers._testing import CHECKS, LayerDescriptor, run_check

# SelfAttention warns on every call, as Flax's does (Flax deprecates it).
pytestmark = pytest.mark.filterwarnings(
    'ignore:SelfAttention will be deprecated:DeprecationWarning'
)


def normal(*shapes):
    def make(key):
        keys = jax.random.split(key, len(shapes))
        return tuple(jax.random.normal(k, s) for k, s in zip(keys, shapes))

    return make


def with_carry(cell_factory, x_shape, two_part):
    """Inputs ``(carry, x)`` for a cell: a random carry of the cell's shape and an input."""

    def make(key):
        k_carry, k_x = jax.random.split(key)
        x = jax.random.normal(k_x, x_shape)
        zeros = cell_factory().initialize_carry(k_carry, x_shape)
        leaves, tree = jax.tree_util.tree_flatten(zeros)
        keys = jax.random.split(k_carry, len(leaves))
        carry = jax.tree_util.tree_unflatten(
            tree, [jax.random.normal(k, leaf.shape) for k, leaf in zip(keys, leaves)]
        )
        assert isinstance(carry, tuple) == two_part
        return carry, x

    return make


def _cell_row(name, factory, x_shape, two_part=False, **extra):
    return LayerDescriptor(name, factory, with_carry(factory, x_shape, two_part), **extra)


ROWS = [
    LayerDescriptor(
        'MultiHeadDotProductAttention', lambda: MultiHeadDotProductAttention(2), normal((2, 4, 6))
    ),
    LayerDescriptor(
        'MultiHeadDotProductAttention_cross',
        lambda: MultiHeadDotProductAttention(3, qkv_features=9, out_features=5),
        normal((2, 4, 6), (2, 5, 6), (2, 5, 3)),
    ),
    LayerDescriptor(
        'MultiHeadDotProductAttention_causal_mask',
        lambda: MultiHeadDotProductAttention(2),
        normal((2, 4, 6)),
        kwargs={'mask': make_causal_mask(jnp.ones((1, 4)))},
    ),
    LayerDescriptor(
        'MultiHeadDotProductAttention_normalize_qk',
        lambda: MultiHeadDotProductAttention(2, qkv_features=8, normalize_qk=True),
        normal((2, 4, 6)),
    ),
    LayerDescriptor(
        'MultiHeadDotProductAttention_dropout',
        lambda: MultiHeadDotProductAttention(2, dropout_rate=0.3, broadcast_dropout=False),
        normal((2, 4, 6)),
        rngs=('dropout',),
        kwargs={'deterministic': False},
    ),
    LayerDescriptor(
        'MultiHeadDotProductAttention_bf16_dtype',
        lambda: MultiHeadDotProductAttention(2, dtype=jnp.bfloat16),
        normal((2, 4, 6)),
        bf16_tol=0.1,
        skip={
            'jit': 'bfloat16 compute: XLA fusion under jit rounds differently from eager '
            '(about one bfloat16 ulp, above the harness tolerance); jit is covered by the '
            'float32 rows'
        },
    ),
    LayerDescriptor('MultiHeadAttention', lambda: MultiHeadAttention(2), normal((2, 4, 6))),
    LayerDescriptor('SelfAttention', lambda: SelfAttention(2), normal((2, 4, 6))),
    _cell_row('LSTMCell', lambda: LSTMCell(4), (2, 3), two_part=True),
    _cell_row('OptimizedLSTMCell', lambda: OptimizedLSTMCell(4), (2, 3), two_part=True),
    _cell_row('GRUCell', lambda: GRUCell(4), (2, 3)),
    _cell_row('MGUCell', lambda: MGUCell(4), (2, 3)),
    _cell_row('MGUCell_no_reset_gate', lambda: MGUCell(4, reset_gate=False), (2, 3)),
    _cell_row('SimpleCell', lambda: SimpleCell(4), (2, 3)),
    _cell_row('SimpleCell_residual', lambda: SimpleCell(3, residual=True), (2, 3)),
    _cell_row('ConvLSTMCell', lambda: ConvLSTMCell(2, (3, 3)), (2, 5, 5, 3), two_part=True),
    LayerDescriptor('RNN_LSTMCell', lambda: RNN(LSTMCell(4)), normal((2, 6, 3))),
    LayerDescriptor(
        'RNN_GRUCell_reverse_carry',
        lambda: RNN(GRUCell(4), reverse=True, keep_order=True, return_carry=True),
        normal((2, 6, 3)),
    ),
    LayerDescriptor(
        'RNN_seq_lengths',
        lambda: RNN(SimpleCell(4), return_carry=True),
        normal((2, 6, 3)),
        kwargs={'seq_lengths': jnp.array([3, 6])},
    ),
    LayerDescriptor('RNN_time_major', lambda: RNN(MGUCell(4), time_major=True), normal((6, 2, 3))),
    LayerDescriptor(
        'Bidirectional',
        lambda: Bidirectional(RNN(LSTMCell(4)), RNN(GRUCell(3))),
        normal((2, 6, 3)),
    ),
]


@pytest.mark.parametrize('check', CHECKS)
@pytest.mark.parametrize('desc', ROWS, ids=lambda d: d.name)
def test_descriptor(desc, check):
    run_check(desc, check)
