"""Staged runs of a layer's operations give the program of the direct operations.

Under a staging trace (jit, make_jaxpr) Dense, DenseGeneral, the attention functions
and the normalization layers run their operations as cached calls inlined into the
caller's program (``_staged.py``). The reference here is the same layer with staging
switched off, running every ``jnp``/``lax`` operation directly: the equations (with
their parameters and profiling labels) must be the same, so the compiled program and
the numbers are too, in apply, in grad and under vmap.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.layers._conv as conv_module
import linen.layers._dot_product as dot_product_module
import linen.layers._linear as linear_module
import linen.layers._norm_stats as norm_stats_module
import linen.layers._normalization as normalization_module
import linen.layers._stochastic as stochastic_module
import linen.nn as nn
from linen.layers._dot_product import dot_product_attention

KEY = jax.random.key(0)


def _normal(shape, i=1, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(i), shape, dtype)


@pytest.fixture
def direct(monkeypatch):
    """A context in which every layer runs its operations directly (no staged runs and
    no one-operation cached calls: bare ``lax`` primitives)."""

    def switch():
        for module in (linear_module, norm_stats_module):
            monkeypatch.setattr(module, 'is_staged', lambda x: False)
        # Dense and attention test a value's type inline: no value has type NoneType.
        for module in (linear_module, dot_product_module):
            monkeypatch.setattr(module, 'STAGING_TRACER', type(None))
        monkeypatch.setattr(linear_module, '_inlined_bias_add', linear_module._bias_add)
        monkeypatch.setattr(
            linear_module, '_inlined_reshaped_bias_add', linear_module._reshaped_bias_add
        )
        monkeypatch.setattr(linear_module, '_one_dot', linear_module._dot)
        monkeypatch.setattr(conv_module, '_one_conv', conv_module._conv)
        monkeypatch.setattr(stochastic_module, '_select', jax.lax.select)
        # (the layers call the shared reshape and broadcast too, under their own names)
        for module in (norm_stats_module, normalization_module):
            monkeypatch.setattr(module, 'reshaped', norm_stats_module._reshape)
            monkeypatch.setattr(module, 'expanded', norm_stats_module._expand)
        monkeypatch.setattr(norm_stats_module, '_square', jax.lax.square)
        monkeypatch.setattr(norm_stats_module, '_rsqrt', jax.lax.rsqrt)
        monkeypatch.setattr(dot_product_module, '_staged_root', dot_product_module._root)

    return switch


def _equations(jaxpr, out=None, depth=0):
    """Every equation, nested ones included: primitive, operand types, parameters, label."""
    out = [] if out is None else out
    for eqn in jaxpr.eqns:
        params = sorted(
            (k, str(v))
            for k, v in eqn.params.items()
            if not hasattr(v, 'eqns') and not hasattr(getattr(v, 'jaxpr', None), 'eqns')
        )
        out.append(
            (
                depth,
                str(eqn.primitive),
                tuple(str(v.aval) for v in eqn.invars),
                tuple(str(v.aval) for v in eqn.outvars),
                tuple(params),
                str(eqn.source_info.name_stack),
            )
        )
        for value in eqn.params.values():
            inner = value if hasattr(value, 'eqns') else getattr(value, 'jaxpr', None)
            if hasattr(inner, 'eqns'):
                _equations(inner, out, depth + 1)
    return out


def _programs(fn, *args):
    """The equations of ``fn`` traced, of its gradient, and of it under vmap."""
    loss = lambda *a: jnp.sum(jnp.asarray(fn(*a), jnp.float32) ** 2)
    batched = jax.vmap(fn, in_axes=(None,) + (0,) * (len(args) - 1))
    stacked = [args[0]] + [jnp.stack([a, a * 0.5]) for a in args[1:]]
    return {
        'apply': _equations(jax.make_jaxpr(fn)(*args).jaxpr),
        'grad': _equations(jax.make_jaxpr(jax.grad(loss))(*args).jaxpr),
        'vmap': _equations(jax.make_jaxpr(batched)(*stacked).jaxpr),
    }


def _eager_values(fn, *args):
    """``fn``'s output, gradient and batched output, computed eagerly (no jit)."""
    loss = lambda *a: jnp.sum(jnp.asarray(fn(*a), jnp.float32) ** 2)
    batched = jax.vmap(fn, in_axes=(None,) + (0,) * (len(args) - 1))
    stacked = [args[0]] + [jnp.stack([a, a * 0.5]) for a in args[1:]]
    return jax.tree_util.tree_leaves((fn(*args), jax.grad(loss)(*args), batched(*stacked)))


def _layer_case(layer, *inputs, rngs=None, mutable=False, **call_kwargs):
    variables = layer.init({'params': KEY, 'dropout': KEY}, *inputs, **call_kwargs)

    def fn(v, *xs):
        out = layer.apply(v, *xs, rngs=rngs, mutable=mutable, **call_kwargs)
        return out[0] if mutable else out

    return fn, (variables, *inputs)


CASES = {
    'dense': lambda: _layer_case(nn.Dense(7), _normal((2, 5, 16))),
    # Rank 3 into 99 features: a product differentiated eagerly as one compiled call
    # gave another kernel gradient (JAX 0.12) than the direct operations.
    'dense, rank 3 into 99 features': lambda: _layer_case(nn.Dense(99), _normal((2, 7, 32))),
    'dense general, rank 3 into 99 features': lambda: _layer_case(
        nn.DenseGeneral(99), _normal((2, 7, 32))
    ),
    'dense without bias, highest precision': lambda: _layer_case(
        nn.Dense(7, use_bias=False, precision='highest'), _normal((3, 16))
    ),
    'dense bfloat16': lambda: _layer_case(
        nn.Dense(7, dtype=jnp.bfloat16), _normal((3, 16), dtype=jnp.bfloat16)
    ),
    'dense general, two axes and a batch axis': lambda: _layer_case(
        nn.DenseGeneral((2, 3), axis=(-2, -1), batch_dims=(0,)), _normal((4, 5, 6, 2))
    ),
    'self-attention': lambda: _layer_case(
        nn.MultiHeadDotProductAttention(num_heads=4, qkv_features=16), _normal((2, 5, 16))
    ),
    'attention with a mask, weights sown': lambda: _layer_case(
        nn.MultiHeadDotProductAttention(num_heads=2),
        _normal((2, 5, 8)),
        _normal((2, 3, 8), 2),
        _normal((2, 3, 8), 3),
        mask=jnp.tril(jnp.ones((2, 2, 5, 3), bool)),
        mutable=['intermediates'],
    ),
    'attention bfloat16 with a float32 softmax': lambda: _layer_case(
        nn.MultiHeadDotProductAttention(
            num_heads=2, dtype=jnp.bfloat16, force_fp32_for_softmax=True
        ),
        _normal((2, 4, 8)),
    ),
    'attention with dropout': lambda: _layer_case(
        nn.MultiHeadDotProductAttention(num_heads=2, dropout_rate=0.5, deterministic=False),
        _normal((2, 4, 8)),
        rngs={'dropout': jax.random.key(7)},
    ),
    'layer norm': lambda: _layer_case(nn.LayerNorm(), _normal((3, 8))),
    'dropout': lambda: _layer_case(
        nn.Dropout(0.3, deterministic=False), _normal((3, 8)), rngs={'dropout': jax.random.key(7)}
    ),
    'conv': lambda: _layer_case(nn.Conv(4, (3, 3)), _normal((2, 6, 6, 3))),
    'conv, strided, dilated, grouped, padding pairs': lambda: _layer_case(
        nn.Conv(
            4,
            (3, 2),
            strides=2,
            kernel_dilation=(1, 2),
            feature_group_count=2,
            padding=[(1, 1), (2, 0)],
        ),
        _normal((2, 7, 6, 4)),
    ),  # fmt: skip
    'group norm': lambda: _layer_case(nn.GroupNorm(num_groups=2), _normal((2, 4, 8))),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_a_staged_layer_traces_to_the_program_of_its_direct_operations(case, direct):
    fn, args = CASES[case]()
    staged = _programs(fn, *args)
    staged_out = jax.jit(fn)(*args)
    staged_eager = _eager_values(fn, *args)
    direct()
    fn, args = CASES[case]()
    expected = _programs(fn, *args)
    for kind in expected:
        assert staged[kind] == expected[kind], kind
    np.testing.assert_array_equal(staged_out, jax.jit(fn)(*args))
    # Eagerly, cached calls run compiled: one operation each, so the same numbers.
    for got, want in zip(staged_eager, _eager_values(fn, *args), strict=True):
        np.testing.assert_array_equal(got, want)


def test_attention_bias_and_mask_are_checked_before_the_staged_run(direct):
    q = _normal((2, 4, 2, 8))
    bias = _normal((2, 2, 4, 4), 5)
    mask = jnp.tril(jnp.ones((1, 1, 4, 4), bool))
    fn = functools.partial(dot_product_attention, bias=bias, mask=mask)
    staged = _equations(jax.make_jaxpr(fn)(q, q, q).jaxpr)
    staged_out = jax.jit(fn)(q, q, q)
    with pytest.raises(ValueError, match='mask'):
        jax.jit(functools.partial(dot_product_attention, mask=jnp.ones((3, 4), bool)))(q, q, q)
    direct()
    assert staged == _equations(jax.make_jaxpr(fn)(q, q, q).jaxpr)
    np.testing.assert_array_equal(staged_out, jax.jit(fn)(q, q, q))
    # By hand: softmax(q k^T / sqrt(8) + bias, masked) v.
    logits = jnp.einsum('bqhd,bkhd->bhqk', q / np.sqrt(8).astype(np.float32), q) + bias
    weights = jax.nn.softmax(jnp.where(mask, logits, jnp.finfo(jnp.float32).min))
    np.testing.assert_allclose(
        staged_out, jnp.einsum('bhqk,bkhd->bqhd', weights, q), rtol=1e-5, atol=1e-6
    )
