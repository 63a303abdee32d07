"""The linear, conv, embed, dropout, pooling and combinator layers through the descriptor
harness: init, apply, jit, vmap, remat, f64, bf16.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from linen.layers import (
    Conv,
    ConvLocal,
    ConvTranspose,
    Dense,
    DenseGeneral,
    Dropout,
    Einsum,
    Embed,
    PReLU,
    Sequential,
    relu,
)
from linen.layers._testing import CHECKS, LayerDescriptor, check_descriptor, run_check


def normal(shape):
    return lambda key: (jax.random.normal(key, shape),)


ROWS = [
    LayerDescriptor('Dense', lambda: Dense(5), normal((3, 4))),
    LayerDescriptor(
        'Dense_bf16_dtype', lambda: Dense(5, dtype=jnp.bfloat16), normal((3, 4)), bf16_tol=0.1
    ),
    LayerDescriptor('DenseGeneral', lambda: DenseGeneral((2, 3), axis=(-2, -1)), normal((3, 4, 5))),
    LayerDescriptor(
        'DenseGeneral_batch', lambda: DenseGeneral(3, batch_dims=(0,)), normal((2, 4, 5))
    ),
    LayerDescriptor('Einsum', lambda: Einsum((4, 3, 5), 'abc,cde->abde'), normal((2, 6, 4))),
    LayerDescriptor('Conv1D', lambda: Conv(3, (3,)), normal((2, 8, 4))),
    LayerDescriptor('Conv2D_strided', lambda: Conv(4, (3, 3), strides=2), normal((2, 7, 7, 3))),
    LayerDescriptor('Conv_circular', lambda: Conv(3, (3,), padding='CIRCULAR'), normal((2, 8, 4))),
    LayerDescriptor(
        'Conv_causal_dilated',
        lambda: Conv(3, (3,), padding='CAUSAL', kernel_dilation=2),
        normal((2, 8, 4)),
    ),
    LayerDescriptor('Conv_groups', lambda: Conv(4, (3,), feature_group_count=2), normal((2, 8, 4))),
    LayerDescriptor('Conv_unbatched', lambda: Conv(3, (3, 3)), normal((6, 6, 2))),
    LayerDescriptor(
        'ConvTranspose', lambda: ConvTranspose(3, (3, 3), strides=(2, 2)), normal((2, 4, 4, 3))
    ),
    LayerDescriptor(
        'ConvTranspose_circular',
        lambda: ConvTranspose(3, (4,), strides=(2,), padding='CIRCULAR'),
        normal((2, 5, 3)),
    ),
    LayerDescriptor('ConvLocal', lambda: ConvLocal(3, (3,)), normal((2, 6, 4))),
    LayerDescriptor(
        'Embed', lambda: Embed(10, 4), lambda key: (jax.random.randint(key, (3, 5), 0, 10),)
    ),
    LayerDescriptor('PReLU', lambda: PReLU(), normal((3, 4))),
    LayerDescriptor(
        'Dropout',
        lambda: Dropout(0.3),
        normal((4, 6)),
        rngs=('dropout',),
        kwargs={'deterministic': False},
    ),
    LayerDescriptor(
        'Dropout_broadcast',
        lambda: Dropout(0.5, broadcast_dims=(-1,), deterministic=False),
        normal((4, 6)),
        rngs=('dropout',),
    ),
    LayerDescriptor('Sequential', lambda: Sequential([Dense(4), relu, Dense(2)]), normal((3, 5))),
]


@pytest.mark.parametrize('check', CHECKS)
@pytest.mark.parametrize('desc', ROWS, ids=lambda d: d.name)
def test_descriptor(desc, check):
    run_check(desc, check)


def test_check_descriptor_reports_each_check():
    results = check_descriptor(ROWS[0], checks=('init', 'apply'))
    assert results == {'init': 'ok', 'apply': 'ok'}
    skipping = ROWS[0]._replace(skip={'jit': 'not today'})
    assert check_descriptor(skipping, checks=('jit',)) == {'jit': 'skipped: Dense: not today'}


def test_the_harness_catches_a_layer_that_breaks_under_jit():
    from linen.module import Module, compact

    class HostBranch(Module):
        # Branches on whether its input is traced: right under apply, wrong under jit.
        @compact
        def __call__(self, x):
            return x if isinstance(x, jax.core.Tracer) else 2 * x

    desc = LayerDescriptor('HostBranch', HostBranch, normal((2,)))
    with pytest.raises(AssertionError, match='jit\\(apply\\) vs apply'):
        run_check(desc, 'jit')


def test_the_harness_catches_a_layer_that_differs_under_vmap():
    from linen.module import Module, compact

    traces = []

    class CountsTraces(Module):
        # Its output depends on how often it has run, so the vmapped result cannot
        # match the per-slice applies that follow it.
        @compact
        def __call__(self, x):
            traces.append(1)
            return x * len(traces)

    desc = LayerDescriptor('CountsTraces', CountsTraces, normal((3, 4)))
    with pytest.raises(AssertionError, match='vmap slice 0 vs apply'):
        run_check(desc, 'vmap')
