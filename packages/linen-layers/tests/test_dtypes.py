"""canonicalize_dtype / promote_dtype."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from linen.layers.dtypes import canonicalize_dtype, promote_dtype


@pytest.mark.parametrize(
    'args,dtype,inexact,expected',
    [
        ((jnp.ones(2, jnp.bfloat16), jnp.ones(2, jnp.float32)), None, True, jnp.float32),
        ((jnp.ones(2, jnp.bfloat16), 1.0), None, True, jnp.bfloat16),  # weak scalar
        ((jnp.ones(2, jnp.int32),), None, True, jnp.float32),
        ((jnp.ones(2, jnp.int8),), None, False, jnp.int8),
        ((jnp.ones(2, jnp.float32), None), jnp.float16, True, jnp.float16),
        ((jnp.ones(2, jnp.int32),), jnp.int16, False, jnp.int16),
    ],
)
def test_canonicalize_dtype(args, dtype, inexact, expected):
    assert canonicalize_dtype(*args, dtype=dtype, inexact=inexact) == jnp.dtype(expected)


def test_canonicalize_rejects_integer_dtype_when_inexact():
    with pytest.raises(ValueError, match='Expected an inexact'):
        canonicalize_dtype(jnp.ones(2), dtype=jnp.int32)


def test_promote_dtype_casts_keeps_none_and_does_not_copy():
    x32 = jnp.ones(2, jnp.float32)
    xb = jnp.ones(2, jnp.bfloat16)
    a, none, b, c = promote_dtype(x32, None, xb, np.ones(2, np.float32))
    assert a is x32 and none is None
    assert b.dtype == jnp.float32 and c.dtype == jnp.float32
    (d,) = promote_dtype(xb, dtype=jnp.float32)
    assert d.dtype == jnp.float32
    assert promote_dtype(jnp.ones(2, jnp.int32), inexact=False)[0].dtype == jnp.int32


def test_same_dtype_fast_path_agrees_with_jax_promotion():
    # The per-call shortcut (every array shares one inexact dtype) must give what
    # jnp.result_type gives, weak types included.
    strong = jnp.ones(2, jnp.bfloat16)
    weak = jnp.asarray(2.0)  # a weak float32 scalar
    cases = [
        (jnp.ones(2, jnp.bfloat16), None, strong),
        (weak, jnp.ones(2)),  # weak f32 with strong f32
        (weak, weak),  # all weak: JAX's lattice decides
        (weak, strong),  # different dtypes: the weak float32 takes bfloat16
        (np.ones(2, np.float32), jnp.ones(2)),  # a NumPy array is cast to a JAX array
    ]
    for args in cases:
        present = [a for a in args if a is not None]
        expected = jnp.result_type(*present)
        assert canonicalize_dtype(*args) == expected
        out = promote_dtype(*args)
        for a, o in zip(args, out):
            if a is None:
                assert o is None
                continue
            assert o.dtype == expected
            if isinstance(a, np.ndarray):
                assert not isinstance(o, np.ndarray)
