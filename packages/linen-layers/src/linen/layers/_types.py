"""A value's shape and dtype read from its JAX type, for the checks every layer call makes.

On a tracer ``x.shape`` and ``x.dtype`` are property calls (``x.ndim`` four calls);
``x.aval`` is a slot, and on an array a cached attribute: the type ``jax.typeof``
returns, without its handler dispatch. Other array-likes (NumPy arrays, scalars)
fall back to NumPy's functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def shape_of(x: Any) -> tuple:
    """``x``'s shape as a tuple."""
    try:
        return x.aval.shape
    except AttributeError:
        return tuple(np.shape(x))


def dtype_of(x: Any) -> Any:
    """``x``'s dtype, or ``None`` for a value without one (a Python scalar)."""
    try:
        return x.aval.dtype
    except AttributeError:
        return getattr(x, 'dtype', None)
