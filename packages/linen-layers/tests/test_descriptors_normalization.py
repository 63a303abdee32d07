"""The normalization layers through the shared descriptor battery."""

from __future__ import annotations

import jax
import pytest

import linen.nn as nn
from linen.layers._testing import CHECKS, LayerDescriptor, run_check


def _x(shape, loc=0.5):
    return lambda key: (jax.random.normal(key, shape) * 2.0 + loc,)


class _Matrix(nn.Module):
    """A small layer with a kernel to wrap, independent of the linear layers."""

    @nn.compact
    def __call__(self, x):
        kernel = self.param('kernel', nn.initializers.lecun_normal(), (x.shape[-1], 3))
        return x @ kernel


ROWS = [
    LayerDescriptor('LayerNorm', lambda: nn.LayerNorm(), _x((3, 6))),
    LayerDescriptor(
        'LayerNorm_axes',
        lambda: nn.LayerNorm(reduction_axes=(1, 2), feature_axes=1),
        _x((2, 3, 4)),
    ),
    LayerDescriptor(
        'LayerNorm_slow_var', lambda: nn.LayerNorm(use_fast_variance=False), _x((3, 6))
    ),
    LayerDescriptor('RMSNorm', lambda: nn.RMSNorm(), _x((3, 6))),
    LayerDescriptor(
        'BatchNorm_train',
        lambda: nn.BatchNorm(use_running_average=False, momentum=0.9),
        _x((4, 3, 5)),
        mutable=('batch_stats',),
    ),
    LayerDescriptor('BatchNorm_eval', lambda: nn.BatchNorm(use_running_average=True), _x((4, 5))),
    LayerDescriptor(
        'BatchNorm_call_arg',
        lambda: nn.BatchNorm(axis=(1, 2)),
        _x((4, 2, 3)),
        mutable=('batch_stats',),
        kwargs={'use_running_average': False},
    ),
    LayerDescriptor('GroupNorm', lambda: nn.GroupNorm(num_groups=2), _x((2, 3, 4))),
    LayerDescriptor(
        'GroupNorm_size', lambda: nn.GroupNorm(num_groups=None, group_size=3), _x((2, 4, 6))
    ),
    LayerDescriptor('InstanceNorm', lambda: nn.InstanceNorm(), _x((2, 5, 3))),
    LayerDescriptor(
        'SpectralNorm',
        lambda: nn.SpectralNorm(_Matrix()),
        _x((2, 4)),
        mutable=('batch_stats',),
        kwargs={'update_stats': True},
    ),
    LayerDescriptor('WeightNorm', lambda: nn.WeightNorm(_Matrix()), _x((2, 4))),
]


@pytest.mark.parametrize('check', CHECKS)
@pytest.mark.parametrize('desc', ROWS, ids=lambda d: d.name)
def test_descriptor(desc, check):
    run_check(desc, check)
