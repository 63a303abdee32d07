"""Layers under Explicit, Auto and mixed mesh axes (the suite's 4 host devices, 2x2).

Each layer gets logically partitioned kernels, placed by the rules on the mesh, and
inputs whose sharding JAX cannot carry through the contraction on its own (a
contracted dimension sharded on both sides, or a kernel-sharded convolution). Its
output must equal the same computation written in plain ``jax.numpy`` on unsharded
arrays, and under explicit axes carry the sharding a user would write by hand.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import linen.nn as nn
from linen.layers import _explicit

TYPES = {
    'explicit': (AxisType.Explicit, AxisType.Explicit),
    'auto': (AxisType.Auto, AxisType.Auto),
    'mixed': (AxisType.Explicit, AxisType.Auto),
}
EXPLICIT_AXES = {'explicit': {'data', 'model'}, 'auto': set(), 'mixed': {'data'}}


def _context(kind, mesh):
    if kind == 'set_mesh':
        return jax.set_mesh(mesh)
    stack = contextlib.ExitStack()
    # Newer JAX deprecates `with mesh:` (0.10.0 does not warn); linen honours it.
    stack.enter_context(warnings.catch_warnings())
    warnings.filterwarnings('ignore', '.*set_mesh', DeprecationWarning)
    stack.enter_context(mesh)
    return stack


def _named(names):
    return nn.with_logical_partitioning(nn.initializers.lecun_normal(), names)


def _bias(names):
    # A non-zero bias, so a misplaced (or resharded-away) bias shows in the output.
    return nn.with_logical_partitioning(nn.initializers.normal(1.0), names)


def _user_dot_general(lhs, rhs, dimension_numbers, precision=None, **kwargs):
    """A user's dot_general: it passes on neither ``out_sharding`` nor anything new."""
    return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=precision)


class _UserDotGeneral:
    def __call__(self, lhs, rhs, dimension_numbers, precision=None, **kwargs):
        return _user_dot_general(lhs, rhs, dimension_numbers, precision)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _mha_reference(p, x):
    def proj(name):
        return np.einsum('ble,ehd->blhd', x, p[name]['kernel']) + p[name]['bias'][None, None]

    q, k, v = proj('query'), proj('key'), proj('value')
    logits = np.einsum('bqhd,bkhd->bhqk', q / np.sqrt(q.shape[-1]), k)
    attn = np.einsum('bhqk,bkhd->bqhd', _softmax(logits), v)
    return np.einsum('blhd,hde->ble', attn, p['out']['kernel']) + p['out']['bias'][None, None]


def _conv_reference(x, kernel, pads, lhs_dilation=1):
    """A channels-last convolution in NumPy: dilate, pad, slide the kernel."""
    n = kernel.ndim - 2
    if lhs_dilation > 1:
        dilated = np.zeros(
            (x.shape[0], *((d - 1) * lhs_dilation + 1 for d in x.shape[1:-1]), x.shape[-1])
        )
        dilated[(slice(None), *(slice(None, None, lhs_dilation),) * n)] = x
        x = dilated
    x = np.pad(x, [(0, 0), *pads, (0, 0)])
    windows = np.lib.stride_tricks.sliding_window_view(x, kernel.shape[:n], axis=range(1, n + 1))
    spatial = 'xyz'[:n]
    window = 'uvw'[:n]
    return np.einsum(f'b{spatial}c{window},{window}co->b{spatial}o', windows, kernel)


def _local_conv_reference(x, kernel):
    """A 1-D 'VALID' locally connected layer in NumPy: one kernel per output position.

    The kernel's input axis is (input feature, window offset), feature-major.
    """
    positions, _, features = kernel.shape
    window = x.shape[1] - positions + 1
    windows = np.lib.stride_tricks.sliding_window_view(x, window, axis=1)
    per_offset = kernel.reshape(positions, x.shape[-1], window, features)
    return np.einsum('bxcu,xcuf->bxf', windows, per_offset)


class Case(NamedTuple):
    make: Callable[[], nn.Module]
    x_shape: tuple
    x_spec: P
    rules: tuple
    reference: Callable[[Any, Any], Any]  # (unboxed params, x) -> the output
    out_spec: P  # the output's sharding under fully explicit axes


CASES = {
    # The contracted 'embed' dimension sharded over 'model' on the input and the kernel.
    'dense_general': Case(
        lambda: nn.DenseGeneral((2, 4), kernel_init=_named(('embed', 'heads', 'kv'))),
        (4, 6, 8),
        P('data', None, 'model'),
        (('embed', 'model'), ('heads', None), ('kv', None)),
        lambda p, x: np.einsum('abc,cde->abde', x, p['kernel']) + p['bias'][None, None],
        P('data', None, None, None),
    ),
    # Two contracted axes, one of them sharded on both sides.
    'dense_general_two_axes': Case(
        lambda: nn.DenseGeneral(
            5,
            axis=(-2, -1),
            kernel_init=_named(('heads', 'kv', 'embed')),
            bias_init=_bias(('embed',)),
        ),
        (4, 2, 8),
        P('data', None, 'model'),
        (('heads', None), ('kv', 'model'), ('embed', None)),
        lambda p, x: np.einsum('abc,bcd->ad', x, p['kernel']) + p['bias'][None],
        P('data', None),
    ),
    # A per-batch kernel (batch_dims) sharded over 'data' like the input's batch.
    'dense_general_batch_dims': Case(
        lambda: nn.DenseGeneral(
            3,
            batch_dims=(0,),
            kernel_init=_named(('batch', 'embed', 'mlp')),
            bias_init=_bias(('batch', 'mlp')),
        ),
        (4, 6, 8),
        P('data', None, 'model'),
        (('batch', 'data'), ('embed', 'model'), ('mlp', None)),
        lambda p, x: np.einsum('abc,acf->abf', x, p['kernel']) + p['bias'][:, None],
        P('data', None, None),
    ),
    'einsum': Case(
        lambda: nn.Einsum((8, 4), '...c,cd->...d', kernel_init=_named(('embed', 'mlp'))),
        (4, 6, 8),
        P('data', None, 'model'),
        (('embed', 'model'), ('mlp', None)),
        lambda p, x: np.einsum('abc,cd->abd', x, p['kernel']) + p['bias'][None, None],
        P('data', None, None),
    ),
    # Tensor parallel: the kernel's (and the bias's) output features over 'model'.
    'einsum_tensor_parallel': Case(
        lambda: nn.Einsum(
            (8, 4), 'abc,cd->abd', kernel_init=_named(('embed', 'mlp')), bias_init=_bias(('mlp',))
        ),
        (4, 6, 8),
        P('data', None, None),
        (('embed', None), ('mlp', 'model')),
        lambda p, x: np.einsum('abc,cd->abd', x, p['kernel']) + p['bias'][None, None],
        P('data', None, 'model'),
    ),
    # Input features sharded and contracted with a kernel sharded the same way.
    'conv': Case(
        lambda: nn.Conv(4, (3,), kernel_init=_named((None, 'embed', 'mlp'))),
        (4, 6, 8),
        P('data', None, 'model'),
        (('embed', 'model'), ('mlp', None)),
        lambda p, x: _conv_reference(x, p['kernel'], [(1, 1)]) + p['bias'][None, None],
        P('data', None, None),
    ),
    'conv_tensor_parallel': Case(
        lambda: nn.Conv(
            4, (3, 3), kernel_init=_named((None, None, 'embed', 'mlp')), bias_init=_bias(('mlp',))
        ),
        (2, 4, 4, 8),
        P('data', None, None, None),
        (('embed', None), ('mlp', 'model')),
        lambda p, x: _conv_reference(x, p['kernel'], [(1, 1)] * 2) + p['bias'][None, None, None],
        P('data', None, None, 'model'),
    ),
    'conv_transpose': Case(
        lambda: nn.ConvTranspose(
            4, (3,), strides=(2,), padding='VALID', kernel_init=_named((None, 'embed', 'mlp'))
        ),
        (4, 6, 8),
        P('data', None, 'model'),
        (('embed', 'model'), ('mlp', None)),
        # A transposed convolution is a convolution of the dilated, fully padded input.
        lambda p, x: _conv_reference(x, p['kernel'], [(2, 2)], 2) + p['bias'][None, None],
        P('data', None, None),
    ),
    # Locally connected: input features sharded like the kernel's input axis (JAX's
    # patch extraction refuses sharded input features).
    'conv_local': Case(
        lambda: nn.ConvLocal(4, (3,), padding='VALID', kernel_init=_named(('pos', 'in', 'mlp'))),
        (4, 6, 8),
        P('data', None, 'model'),
        (('in', 'model'), ('pos', None), ('mlp', None)),
        lambda p, x: _local_conv_reference(x, p['kernel']) + p['bias'][None],
        P('data', None, None),
    ),
    # The kernel's output positions over 'model' (the input's positions are not):
    # the output keeps the kernel's position sharding, the bias follows it.
    'conv_local_positions': Case(
        lambda: nn.ConvLocal(
            4,
            (3,),
            padding='VALID',
            kernel_init=_named(('pos', 'in', 'mlp')),
            bias_init=_bias(('pos', 'mlp')),
        ),
        (4, 6, 8),
        P('data', None, None),
        (('pos', 'model'), ('in', None), ('mlp', None)),
        lambda p, x: _local_conv_reference(x, p['kernel']) + p['bias'][None],
        P('data', 'model', None),
    ),
    'conv_local_tensor_parallel': Case(
        lambda: nn.ConvLocal(
            4,
            (3,),
            padding='VALID',
            kernel_init=_named(('pos', 'in', 'mlp')),
            bias_init=_bias(('pos', 'mlp')),
        ),
        (4, 6, 8),
        P('data', 'model', None),
        (('pos', None), ('in', None), ('mlp', 'model')),
        lambda p, x: _local_conv_reference(x, p['kernel']) + p['bias'][None],
        P('data', None, 'model'),
    ),
    # A user's dot_general (which takes no out_sharding) on a contraction sharded on
    # both sides (or, below, on the input only, with the heads over the same axis):
    # its operands are resharded until JAX can infer the output.
    'dense_user_dot_general': Case(
        lambda: nn.Dense(4, dot_general=_user_dot_general, kernel_init=_named(('embed', 'mlp'))),
        (4, 6, 8),
        P('data', None, 'model'),
        (('embed', 'model'), ('mlp', None)),
        lambda p, x: x @ p['kernel'] + p['bias'][None, None],
        P('data', None, None),
    ),
    'dense_general_user_dot_general_cls': Case(
        lambda: nn.DenseGeneral(
            (2, 4),
            dot_general_cls=_UserDotGeneral,
            kernel_init=_named(('embed', 'heads', 'kv')),
            bias_init=_bias(('heads', 'kv')),
        ),
        (4, 6, 8),
        P('data', None, 'model'),
        (('embed', None), ('heads', 'model'), ('kv', None)),
        lambda p, x: np.einsum('abc,cde->abde', x, p['kernel']) + p['bias'][None, None],
        P('data', None, 'model', None),
    ),
    # A user's einsum dot_general in the attention, with the head depth (contracted
    # in the logits) sharded over 'model' on the queries and the keys.
    'attention_user_einsum_dot_general': Case(
        lambda: nn.MultiHeadDotProductAttention(
            num_heads=2,
            kernel_init=_named(('embed', 'heads', 'kv')),
            bias_init=_bias(('heads', 'kv')),
            out_kernel_init=_named(('heads', 'kv', 'embed')),
            out_bias_init=_bias(('embed',)),
            attention_fn=functools.partial(
                nn.dot_product_attention, einsum_dot_general=_user_dot_general
            ),
        ),
        (4, 6, 8),
        P('data', None, None),
        (('embed', None), ('heads', None), ('kv', 'model')),
        lambda p, x: _mha_reference(p, x),
        P('data', None, None),
    ),
    # Megatron-style attention: heads over 'model'; the output projection contracts
    # (heads, kv) with the heads sharded on both sides.
    'attention_tensor_parallel': Case(
        lambda: nn.MultiHeadDotProductAttention(
            num_heads=2,
            kernel_init=_named(('embed', 'heads', 'kv')),
            bias_init=_bias(('heads', 'kv')),
            out_kernel_init=_named(('heads', 'kv', 'embed')),
            out_bias_init=_bias(('embed',)),
        ),
        (4, 6, 8),
        P('data', None, None),
        (('embed', None), ('heads', 'model'), ('kv', None)),
        lambda p, x: _mha_reference(p, x),
        P('data', None, None),
    ),
    # The embedding sharded over 'model' on the input and on every kernel.
    'attention_sharded_embed': Case(
        lambda: nn.MultiHeadDotProductAttention(
            num_heads=2,
            kernel_init=_named(('embed', 'heads', 'kv')),
            out_kernel_init=_named(('heads', 'kv', 'embed')),
        ),
        (4, 6, 8),
        P('data', None, 'model'),
        (('embed', 'model'), ('heads', None), ('kv', None)),
        lambda p, x: _mha_reference(p, x),
        P('data', None, 'model'),
    ),
}


def _is_box(v):
    return isinstance(v, nn.Partitioned)


def _variables(module, x, mesh, rules):
    """Random boxed variables (NumPy, no compile), placed on ``mesh`` as their names say.

    Returns them and their unboxed NumPy values.
    """
    abstract = jax.eval_shape(module.init, jax.random.key(0), x)
    rng = np.random.default_rng(0)
    values = jax.tree_util.tree_map(
        lambda a: rng.standard_normal(a.shape).astype(np.float32) / 2, abstract
    )
    shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, rules)
    placed = jax.tree_util.tree_map(
        lambda v, s: v.replace_boxed(jax.device_put(v.value, s)) if _is_box(v) else v,
        values,
        shardings,
        is_leaf=_is_box,
    )
    plain = jax.tree_util.tree_map(lambda v: v.value if _is_box(v) else v, values, is_leaf=_is_box)
    return placed, plain


def _explicit_part(spec, ndim, explicit):
    entries = tuple(spec) + (None,) * (ndim - len(spec))
    return tuple(e if e in explicit else None for e in entries)


def _run(name, types, context):
    case = CASES[name]
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES[types])
    x = np.random.default_rng(1).standard_normal(case.x_shape).astype(np.float32)
    module = case.make()
    with _context(context, mesh), nn.logical_axis_rules(case.rules):
        variables, values = _variables(module, x, mesh, case.rules)
        xs = jax.device_put(x, NamedSharding(mesh, case.x_spec))
        y = jax.jit(module.apply)(variables, xs)
    expected = case.reference(values['params'], x.astype(np.float64))
    np.testing.assert_allclose(y, expected, rtol=2e-5, atol=2e-5)
    explicit = EXPLICIT_AXES[types]
    assert _explicit_part(y.sharding.spec, y.ndim, explicit) == _explicit_part(
        case.out_spec, y.ndim, explicit
    )
    return y


@pytest.mark.parametrize('name', list(CASES))
def test_layer_under_explicit_axes(name):
    # Flax's layers raise ShardingTypeError on every one of these.
    _run(name, 'explicit', 'set_mesh')


# Fewer cases on the other axis types (each is a compile): the mixed mesh gets one
# layer per helper; Auto meshes go through the unchanged path (see the last test).
@pytest.mark.parametrize(
    ('name', 'types'),
    [
        ('dense_general', 'mixed'),
        ('conv_tensor_parallel', 'mixed'),
        ('attention_tensor_parallel', 'mixed'),
        ('conv_transpose', 'mixed'),
        ('conv_local', 'mixed'),
        ('dense_user_dot_general', 'mixed'),
        ('dense_general_two_axes', 'auto'),
        ('attention_sharded_embed', 'auto'),
    ],
)
def test_layer_under_mixed_and_auto_axes(name, types):
    _run(name, types, 'set_mesh')


@pytest.mark.parametrize('name', ['einsum', 'conv_transpose', 'attention_sharded_embed'])
def test_layer_under_the_legacy_mesh_context_with_explicit_axes(name):
    _run(name, 'explicit', 'legacy')


@pytest.mark.parametrize('types', list(TYPES))
def test_dense_with_sharded_contracting_dimension(types):
    # Flax's Dense raises ShardingTypeError here under Explicit axes.
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES[types])
    x = jnp.arange(32.0).reshape(4, 8) / 10
    kernel = jnp.arange(24.0).reshape(8, 3) / 7
    bias = jnp.array([0.5, -1.0, 2.0])
    variables = {'params': {'kernel': kernel, 'bias': bias}}
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, NamedSharding(mesh, P('data', 'model')))
        ks = jax.device_put(kernel, NamedSharding(mesh, P('model', None)))
        sharded = {'params': {'kernel': ks, 'bias': bias}}
        y = jax.jit(nn.Dense(3).apply)(sharded, xs)
    np.testing.assert_allclose(y, x @ kernel + bias.reshape(1, 3), rtol=1e-6, atol=1e-6)
    assert y.sharding.spec[0] == 'data'
    np.testing.assert_allclose(nn.Dense(3).apply(variables, x), y, rtol=1e-6, atol=1e-6)


def test_dense_under_the_legacy_mesh_context_with_explicit_axes():
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES['explicit'])
    x = jnp.arange(32.0).reshape(4, 8) / 10
    kernel = jnp.arange(24.0).reshape(8, 3) / 7
    with _context('legacy', mesh):
        xs = jax.device_put(x, NamedSharding(mesh, P('data', 'model')))
        ks = jax.device_put(kernel, NamedSharding(mesh, P('model', None)))
        y = jax.jit(nn.Dense(3, use_bias=False).apply)({'params': {'kernel': ks}}, xs)
    np.testing.assert_allclose(y, x @ kernel, rtol=1e-6, atol=1e-6)
    assert y.sharding.spec == P('data', None)


def test_dense_tensor_parallel_under_explicit_axes_keeps_the_feature_sharding():
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES['explicit'])
    x = jnp.ones((4, 8))
    kernel = jnp.arange(32.0).reshape(8, 4)
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, NamedSharding(mesh, P('data', None)))
        ks = jax.device_put(kernel, NamedSharding(mesh, P(None, 'model')))
        y = jax.jit(nn.Dense(4, use_bias=False).apply)({'params': {'kernel': ks}}, xs)
    assert y.sharding.spec == P('data', 'model')
    np.testing.assert_allclose(y, x @ kernel, rtol=1e-6)


def test_dense_whose_output_would_use_one_mesh_axis_twice():
    # FSDP-like: the batch and the kernel's features both over 'data'; JAX refuses
    # P('data', 'data'), the batch keeps the axis.
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES['explicit'])
    x = jnp.arange(32.0).reshape(4, 8) / 10
    kernel = jnp.arange(32.0).reshape(8, 4) / 9
    bias = jnp.arange(4.0)
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, NamedSharding(mesh, P('data', None)))
        ks = jax.device_put(kernel, NamedSharding(mesh, P(None, 'data')))
        bs = jax.device_put(bias, NamedSharding(mesh, P('data')))
        y = jax.jit(nn.Dense(4).apply)({'params': {'kernel': ks, 'bias': bs}}, xs)
    assert y.sharding.spec == P('data', None)
    np.testing.assert_allclose(y, x @ kernel + bias[None], rtol=1e-6, atol=1e-6)


def test_nothing_changes_on_auto_meshes(monkeypatch):
    # On Auto axes the helpers must not touch the traced program: the jaxpr equals
    # the one traced with the explicit-axes handling switched off.
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES['auto'])
    case = CASES['attention_tensor_parallel']
    module = case.make()
    x = np.ones(case.x_shape, np.float32)
    with jax.set_mesh(mesh), nn.logical_axis_rules(case.rules):
        variables, _ = _variables(module, x, mesh, case.rules)
        xs = jax.device_put(x, NamedSharding(mesh, P('data', None, 'model')))
        ours = str(jax.make_jaxpr(module.apply)(variables, xs))
        monkeypatch.setattr(_explicit, 'explicit_mesh', lambda *operands: None)
        without = str(jax.make_jaxpr(module.apply)(variables, xs))
    assert ours == without
    assert 'reshard' not in ours


def _causal_mha_reference(p, x):
    """Causal self-attention in NumPy: position t attends to positions 0..t."""

    def proj(name):
        return np.einsum('ble,ehd->blhd', x, p[name]['kernel']) + p[name]['bias'][None, None]

    q, k, v = proj('query'), proj('key'), proj('value')
    logits = np.einsum('bqhd,bkhd->bhqk', q / np.sqrt(q.shape[-1]), k)
    length = x.shape[1]
    logits = np.where(np.tril(np.ones((length, length), bool))[None, None], logits, -1e30)
    attn = np.einsum('bhqk,bkhd->bqhd', _softmax(logits), v)
    return np.einsum('blhd,hde->ble', attn, p['out']['kernel']) + p['out']['bias'][None, None]


@pytest.mark.parametrize(
    'cache_spec',
    [None, P(None, 'model', None, None)],
    ids=['cache_from_init', 'cache_over_length'],
)
def test_decode_cache_under_explicit_axes(cache_spec):
    # Flax's decode step raises ShardingTypeError here: the cache is created
    # replicated and dynamic_update_slice wants the step sharded like it. The cache
    # now follows the keys' sharding at init, each step is written in the cache's
    # sharding (a cache over its length axis too), and the carry keeps its type.
    mesh = jax.make_mesh((2, 2), ('data', 'model'), axis_types=TYPES['explicit'])
    rules = (('embed', None), ('heads', 'model'), ('kv', None))
    module = nn.MultiHeadDotProductAttention(
        num_heads=2,
        decode=True,
        kernel_init=_named(('embed', 'heads', 'kv')),
        bias_init=_bias(('heads', 'kv')),
        out_kernel_init=_named(('heads', 'kv', 'embed')),
        out_bias_init=_bias(('embed',)),
    )
    x = np.random.default_rng(2).standard_normal((4, 4, 8)).astype(np.float32)
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        variables, values = _variables(module, x, mesh, rules)
        xs = jax.device_put(x, NamedSharding(mesh, P('data', None, None)))
        # init's cache (zeros) is placed as init types it, without compiling init.
        abstract = jax.eval_shape(module.init, jax.random.key(0), xs)['cache']
        assert abstract['cached_key'].sharding.spec == P('data', None, 'model', None)

        def place(a):
            spec = P() if not a.ndim else cache_spec or a.sharding.spec
            return jax.device_put(np.zeros(a.shape, a.dtype), NamedSharding(mesh, spec))

        cache = jax.tree_util.tree_map(place, abstract)
        spec_before = cache['cached_key'].sharding.spec
        step = jax.jit(lambda c, t: module.apply({**variables, 'cache': c}, t, mutable=['cache']))
        outputs = []
        for t in range(x.shape[1]):
            y, updated = step(cache, xs[:, t : t + 1])
            cache = updated['cache']
            outputs.append(np.asarray(y))
    assert cache['cached_key'].sharding.spec == spec_before
    expected = _causal_mha_reference(values['params'], x.astype(np.float64))
    np.testing.assert_allclose(np.concatenate(outputs, axis=1), expected, rtol=2e-5, atol=2e-5)
