"""Module repr: nesting and the max_repr_depth flag."""

from __future__ import annotations


def test_max_repr_depth_elides_deeper_modules():
    import linen.nn as nn
    from linen.core import config

    class Inner(nn.Module):
        layer: nn.Module

    class Outer(nn.Module):
        inner: nn.Module

    module = Outer(Inner(nn.Dense(2)))
    assert 'features = 2' in repr(module)
    with config.temp_flip_flag('max_repr_depth', 2):
        limited = repr(module)
    assert 'Inner(' in limited and 'Dense(...)' in limited and 'features' not in limited
    with config.temp_flip_flag('max_repr_depth', 1):
        assert 'inner = Inner(...)' in repr(module)
    assert 'features = 2' in repr(module)
