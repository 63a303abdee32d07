"""The dtype rules of the layers; the public surface is :mod:`linen.layers.dtypes`."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

__all__ = ['canonicalize_dtype', 'promote_dtype']


def canonicalize_dtype(*args, dtype: Any | None = None, inexact: bool = True):
    """Returns the dtype a computation over ``args`` should run in.

    Args:
      *args: arrays, scalars or ``None`` (ignored).
      dtype: an explicit dtype, which wins when given.
      inexact: require a floating or complex result. With ``dtype=None``, integer
        or boolean inputs are promoted with float32; an explicit integer ``dtype``
        raises.

    Raises:
      ValueError: ``inexact`` is set and ``dtype`` is neither floating nor complex.

    >>> import jax.numpy as jnp
    >>> canonicalize_dtype(jnp.ones(2, jnp.bfloat16), jnp.ones(2, jnp.float32))
    dtype('float32')
    >>> canonicalize_dtype(jnp.ones(2, jnp.int32))
    dtype('float32')
    """
    if dtype is None:
        common = _common_array_dtype(args)
        if common is not None:
            return common
        present = [x for x in args if x is not None]
        first = getattr(present[0], 'dtype', None) if present else None
        # Common case on every call of a layer: inputs and params share one
        # inexact dtype, and the lattice computation would only confirm it.
        if (
            first is not None
            and all(getattr(x, 'dtype', None) == first for x in present)
            and all(not getattr(x, 'weak_type', False) for x in present)
            and jnp.issubdtype(first, jnp.inexact)
        ):
            return jnp.dtype(first)
        dtype = jnp.result_type(*present)
        if inexact and not jnp.issubdtype(dtype, jnp.inexact):
            dtype = jnp.promote_types(jnp.float32, dtype)
    elif inexact and not jnp.issubdtype(dtype, jnp.inexact):
        raise ValueError(
            f'Expected an inexact (floating or complex) dtype, got {dtype}. Pass a float '
            'dtype such as jnp.float32, or inexact=False to allow integer dtypes.'
        )
    return jnp.dtype(dtype)


def promote_dtype(*args, dtype: Any | None = None, inexact: bool = True) -> list:
    """Casts every non-``None`` argument to one common dtype.

    The dtype is ``canonicalize_dtype(*args, dtype=dtype, inexact=inexact)``.
    Arguments that already have it are returned as they are (no copy).

    Returns:
      a list as long as ``args``, ``None`` kept in place.

    >>> import jax.numpy as jnp
    >>> x, none, y = promote_dtype(jnp.ones(2, jnp.bfloat16), None, jnp.ones(2))
    >>> x.dtype, none, y.dtype
    (dtype('float32'), None, dtype('float32'))
    """
    if dtype is None and _common_array_dtype(args) is not None:
        return list(args)  # nothing to cast (what the general path below would find)
    dtype = canonicalize_dtype(*args, dtype=dtype, inexact=inexact)
    # Skipping the cast when the dtype already matches keeps traced programs small.
    return [
        x if x is None or (isinstance(x, jax.Array) and x.dtype == dtype) else jnp.asarray(x, dtype)
        for x in args
    ]


_INEXACT: dict[Any, bool] = {}


def _common_array_dtype(args: tuple) -> Any:
    """The dtype of every non-``None`` arg when they are JAX arrays sharing one inexact dtype.

    Then ``jnp.result_type`` would give that dtype (weak types lose to a strong
    one of the same dtype), so layers skip the promotion lattice: this runs on
    every layer call. ``None`` when that does not hold, or every arg is weakly
    typed (the general rule decides then).
    """
    common = None
    for x in args:
        if x is None:
            continue
        # JAX values (tracers and arrays), and only they, have a type: an attribute
        # read (a slot on tracers), no isinstance tests and no property calls.
        try:
            dtype = x.aval.dtype
        except AttributeError:  # a NumPy array, a Python scalar
            return None
        if common is None:
            common = dtype
        elif dtype != common:
            return None
    if common is None:
        return None
    try:
        inexact = _INEXACT[common]
    except KeyError:
        inexact = _INEXACT[common] = bool(jnp.issubdtype(common, jnp.inexact))
    if not inexact:
        return None
    # Parameters come last and are strongly typed: usually one check.
    for x in reversed(args):
        if x is not None and not x.aval.weak_type:
            return common
    return None
