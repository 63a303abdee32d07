"""The benchmark models in Haiku (``hk.transform``, ``hk.layer_stack`` for the scan)."""

from __future__ import annotations

import haiku as hk
import jax

from benchmarks._impl import Impl
from benchmarks._sizes import LN_EPSILON, Sizes


def _layer_norm():
    return hk.LayerNorm(axis=-1, create_scale=True, create_offset=True, eps=LN_EPSILON)


def _mlp(depth, width):
    def f(x):
        for i in range(depth):
            x = hk.Linear(width)(x)
            if i < depth - 1:
                x = jax.nn.relu(x)
        return x

    return f


def _encoder(s: Sizes):
    def block(x):
        h = _layer_norm()(x)
        attn = hk.MultiHeadAttention(
            num_heads=s.tf_heads,
            key_size=s.tf_width // s.tf_heads,
            model_size=s.tf_width,
            w_init=hk.initializers.VarianceScaling(1.0),
        )
        x = x + attn(h, h, h)
        h = jax.nn.relu(hk.Linear(s.tf_hidden)(_layer_norm()(x)))
        return x + hk.Linear(s.tf_width)(h)

    def f(x):
        for _ in range(s.tf_blocks):
            x = block(x)
        return _layer_norm()(x)

    return f


def _res_block(width):
    def f(x):
        return x + hk.Linear(width)(jax.nn.relu(hk.Linear(width)(x)))

    return f


def _scanned(s: Sizes):
    def f(x):
        return hk.layer_stack(s.res_blocks)(_res_block(s.res_width))(x)

    return f


def _unrolled(s: Sizes):
    def f(x):
        for _ in range(s.res_blocks):
            x = _res_block(s.res_width)(x)
        return x

    return f


def _impl(fn) -> Impl:
    t = hk.without_apply_rng(hk.transform(fn))
    return Impl(t.init, t.apply)


def models(sizes: Sizes) -> dict[str, Impl]:
    """The Haiku models, keyed like the pure JAX ones."""
    s = sizes
    return {
        'mlp': _impl(_mlp(s.mlp_depth, s.mlp_width)),
        'transformer': _impl(_encoder(s)),
        'tiny': _impl(_mlp(2, s.tiny_width)),
        'scan': _impl(_scanned(s)),
        'unrolled': _impl(_unrolled(s)),
    }
