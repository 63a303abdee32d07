"""The floor: every benchmark model in pure JAX with explicit parameter pytrees.

This is the fastest idiomatic code a JAX user writes for the same math, under JAX's
default settings (where the benchmarks run, see ``run.py``): ``x @ kernel + bias``
with the bias broadcast by NumPy rules, no eager reshapes, no helper calls per layer
beyond the layer function itself. A baseline that does extra work flatters every
ratio, so it is a defect of the benchmark.

The layers follow Flax's documented conventions (``(in, out)`` kernels, LeCun-normal
kernels and zero biases, LayerNorm with epsilon 1e-6, attention scaled by
``1/sqrt(head_dim)``), so the programs issue the same JAX operations as the module
libraries and compile to the same optimized HLO, instruction by instruction.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from benchmarks._impl import Impl
from benchmarks._sizes import LN_EPSILON, Sizes

_kernel_init = jax.nn.initializers.lecun_normal()


def _dense_init(key, n_in, n_out):
    return {'kernel': _kernel_init(key, (n_in, n_out)), 'bias': jnp.zeros((n_out,))}


def _dense(p, x):
    return x @ p['kernel'] + p['bias']


def _ln_init(width):
    return {'scale': jnp.ones((width,)), 'bias': jnp.zeros((width,))}


def _layer_norm(p, x):
    # The square first: the same math with the mean first differentiates into the same
    # equations in another order, and XLA's CPU compiler then builds a backward pass
    # that compiles ~3x slower and runs ~1.4x slower in the transformer's train step.
    mean2 = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.maximum(mean2 - jnp.square(mean), 0.0)
    # Folding the scale into the reciprocal first touches a (..., 1) array, not the
    # whole activation; it is also the order Flax uses, so the programs compare equal.
    return (x - mean) * (jax.lax.rsqrt(var + LN_EPSILON) * p['scale']) + p['bias']


def _mlp_init(key, depth, width):
    return [_dense_init(k, width, width) for k in jax.random.split(key, depth)]


def _mlp_apply(params, x):
    for i, layer in enumerate(params):
        x = _dense(layer, x)
        if i < len(params) - 1:
            x = jax.nn.relu(x)
    return x


def _attn_init(key, width, heads):
    head_dim = width // heads
    kq, kk, kv, ko = jax.random.split(key, 4)

    def proj(k):
        kernel = _kernel_init(k, (width, width)).reshape(width, heads, head_dim)
        return {'kernel': kernel, 'bias': jnp.zeros((heads, head_dim))}

    out = _kernel_init(ko, (width, width)).reshape(heads, head_dim, width)
    return {
        'query': proj(kq),
        'key': proj(kk),
        'value': proj(kv),
        'out': {'kernel': out, 'bias': jnp.zeros((width,))},
    }


def _attention(p, x):
    # (batch, seq, width) x (width, heads, head_dim) -> (batch, seq, heads, head_dim)
    def proj(q):
        y = jax.lax.dot_general(x, q['kernel'], (((2,), (0,)), ((), ())))
        return y + q['bias']

    q, k, v = proj(p['query']), proj(p['key']), proj(p['value'])
    q = q / math.sqrt(q.shape[-1])  # a host constant: jnp.sqrt would add two equations
    weights = jax.nn.softmax(jnp.einsum('bqhd,bkhd->bhqk', q, k), axis=-1)
    out = jnp.einsum('bhqk,bkhd->bqhd', weights, v)
    # Contract (heads, head_dim) in one dot: an einsum here adds a kernel transpose.
    out = jax.lax.dot_general(out, p['out']['kernel'], (((2, 3), (0, 1)), ((), ())))
    return out + p['out']['bias']


def _encoder_init(key, s: Sizes):
    blocks = []
    for k in jax.random.split(key, s.tf_blocks):
        ka, k1, k2 = jax.random.split(k, 3)
        blocks.append(
            {
                'ln1': _ln_init(s.tf_width),
                'attn': _attn_init(ka, s.tf_width, s.tf_heads),
                'ln2': _ln_init(s.tf_width),
                'fc1': _dense_init(k1, s.tf_width, s.tf_hidden),
                'fc2': _dense_init(k2, s.tf_hidden, s.tf_width),
            }
        )
    return {'blocks': blocks, 'ln_f': _ln_init(s.tf_width)}


def _encoder_apply(params, x):
    for b in params['blocks']:
        x = x + _attention(b['attn'], _layer_norm(b['ln1'], x))
        h = jax.nn.relu(_dense(b['fc1'], _layer_norm(b['ln2'], x)))
        x = x + _dense(b['fc2'], h)
    return _layer_norm(params['ln_f'], x)


def _res_init(key, width):
    k1, k2 = jax.random.split(key)
    return {'fc1': _dense_init(k1, width, width), 'fc2': _dense_init(k2, width, width)}


def _res_apply(p, x):
    return x + _dense(p['fc2'], jax.nn.relu(_dense(p['fc1'], x)))


def _scan_apply(params, x):
    x, _ = jax.lax.scan(lambda h, p: (_res_apply(p, h), None), x, params)
    return x


def _unrolled_apply(params, x):
    for p in params:
        x = _res_apply(p, x)
    return x


def models(sizes: Sizes) -> dict[str, Impl]:
    """The pure JAX models, keyed like :func:`benchmarks.models_flax_style.flax_style_models`."""
    s = sizes
    return {
        'mlp': Impl(lambda k, x: _mlp_init(k, s.mlp_depth, s.mlp_width), _mlp_apply),
        'transformer': Impl(lambda k, x: _encoder_init(k, s), _encoder_apply),
        'tiny': Impl(lambda k, x: _mlp_init(k, 2, s.tiny_width), _mlp_apply),
        'scan': Impl(
            lambda k, x: jax.vmap(lambda kk: _res_init(kk, s.res_width))(
                jax.random.split(k, s.res_blocks)
            ),
            _scan_apply,
        ),
        'unrolled': Impl(
            lambda k, x: [_res_init(kk, s.res_width) for kk in jax.random.split(k, s.res_blocks)],
            _unrolled_apply,
        ),
    }


def jit_tower(width: int, instances: int) -> Impl:
    """``instances`` calls of one fresh ``jax.jit`` block, each with its own parameters:
    the pure JAX counterpart of ``instances`` ``nn.jit`` instances of one class."""

    @jax.jit
    def block(p, x):
        return jnp.tanh(_dense(p, x))

    def init(key, x):
        return [_dense_init(k, width, width) for k in jax.random.split(key, instances)]

    def apply(params, x):
        for p in params:
            x = block(p, x)
        return x

    return Impl(init, apply)
