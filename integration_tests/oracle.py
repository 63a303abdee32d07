"""What the Flax-oracle tests share: linen's result is Flax's, bit for bit, under the
JAX settings a test (or a fuzz reproducer) chooses.

Test modules import it as ``integration_tests.oracle`` (``conftest.py`` puts the
repository root on ``sys.path``).
"""

from __future__ import annotations

import contextlib
from typing import Any

import jax
import numpy as np


@contextlib.contextmanager
def jax_settings(settings: dict[str, Any]):
    """Run under ``settings`` (JAX config names and values), restored after."""
    old = {name: getattr(jax.config, name) for name in settings}
    try:
        for name, value in settings.items():
            jax.config.update(name, value)
        yield
    finally:
        for name, value in old.items():
            jax.config.update(name, value)


def assert_same_bits(ours, theirs) -> None:
    """The same tree structure, and every leaf of the same dtype, shape and bits.

    Bits, not values: ``-0.0`` is not ``0.0``, and a NaN must be the same NaN.
    """
    leaves, tree = jax.tree_util.tree_flatten(ours)
    their_leaves, their_tree = jax.tree_util.tree_flatten(theirs)
    assert tree == their_tree, f'tree structures differ:\n{tree}\n{their_tree}'
    for a, b in zip(leaves, their_leaves, strict=True):
        a, b = _bits(a), _bits(b)
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
        if a.tobytes() != b.tobytes():
            np.testing.assert_array_equal(a, b)  # says where the values differ
            raise AssertionError(f'equal values with other bits (signed zeros, NaNs): {a} {b}')


def _bits(leaf) -> np.ndarray:
    if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(leaf))
    return np.asarray(leaf)


__all__ = ['assert_same_bits']
