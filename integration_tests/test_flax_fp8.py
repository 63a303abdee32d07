"""Flax as the oracle for fp8: ``nn.fp8_ops`` functions and the fp8 dot-general modules.

Outputs, gradients and the ``_overwrite_with_gradient`` updates (the new scales and amax
histories that come back as gradients) must be bit-identical to Flax's on CPU: both
sides run the same quantization arithmetic, so any difference is a behaviour change.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

fnn = pytest.importorskip('flax.linen')
fops = pytest.importorskip('flax.linen.fp8_ops')

import linen.nn as nn  # noqa: E402
from linen.layers.errors import LayerArgumentError  # noqa: E402

ops = nn.fp8_ops

pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]

KEYS = jax.random.split(jax.random.key(8), 8)
OWG = '_overwrite_with_gradient'


def _normal(i, shape, scale=1.0, dtype=jnp.float32):
    return (scale * jax.random.normal(KEYS[i], shape)).astype(dtype)


def assert_identical(ours, theirs):
    leaves_a, tree_a = jax.tree_util.tree_flatten(ours)
    leaves_b, tree_b = jax.tree_util.tree_flatten(theirs)
    assert tree_a == tree_b
    for a, b in zip(leaves_a, leaves_b):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))


# ----------------------------------------------------------------------------- functions

FP8 = [jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.float8_e4m3fnuz, jnp.float8_e5m2fnuz]


@pytest.mark.parametrize('q_dtype', FP8, ids=lambda d: jnp.dtype(d).name)
def test_quantize_dequantize_qdq(q_dtype):
    x = _normal(0, (3, 5), scale=300.0)
    scale = jnp.array([0.5], jnp.float32)
    assert_identical(ops.get_fp8_max(q_dtype, jnp.float32), fops.get_fp8_max(q_dtype, jnp.float32))
    for name in ('quantize', 'qdq'):
        assert_identical(
            getattr(ops, name)(x, q_dtype, scale, jnp.float32),
            getattr(fops, name)(x, q_dtype, scale, jnp.float32),
        )
    q = fops.quantize(x, q_dtype, scale, jnp.float32)
    assert_identical(
        ops.dequantize(q, jnp.bfloat16, scale), fops.dequantize(q, jnp.bfloat16, scale)
    )


def test_scale_and_history_updates():
    history = jnp.array([3.0, 0.0, 900.0, 1.0], jnp.float32)
    scale = jnp.array([2.0], jnp.float32)
    x = _normal(0, (4, 3), scale=50.0)
    for amax in (jnp.float32(900.0), jnp.float32(0.0), jnp.float32(jnp.inf)):
        for margin in (0, 1):
            assert_identical(
                ops.compute_scale(amax, scale, 448.0, margin),
                fops.compute_scale(amax, scale, 448.0, margin),
            )
    assert_identical(ops.compute_amax_history(x, history), fops.compute_amax_history(x, history))
    assert_identical(
        ops.update_fp8_meta(x, jnp.float8_e4m3fn, scale, history),
        fops.update_fp8_meta(x, jnp.float8_e4m3fn, scale, history),
    )
    assert_identical(
        ops.quantize_dequantize_update(x, jnp.float8_e5m2, scale, history, jnp.float32),
        fops.quantize_dequantize_update(x, jnp.float8_e5m2, scale, history, jnp.float32),
    )


def test_get_fp8_max_rejects_other_dtypes():
    # Flax asserts; linen raises a typed ValueError naming the dtype and the choices.
    with pytest.raises(LayerArgumentError, match='float16 is not an fp8 dtype'):
        ops.get_fp8_max(jnp.float16, jnp.float32)


DOT_DIMS = {
    'matmul': ((3, 4), (4, 5), (((1,), (0,)), ((), ()))),
    'batched': ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    'two-contract-swapped': ((3, 4, 6), (6, 5, 4), (((1, 2), (2, 0)), ((), ()))),
    'batch-middle': ((3, 2, 4), (4, 2, 5), (((2,), (0,)), ((1,), (1,)))),
}


@pytest.mark.parametrize('case', sorted(DOT_DIMS))
def test_dot_general_transposes(case):
    x_shape, y_shape, dims = DOT_DIMS[case]
    x, y = _normal(0, x_shape), _normal(1, y_shape)
    out, vjp = jax.vjp(lambda a, b: lax.dot_general(a, b, dims), x, y)
    g = _normal(2, out.shape)
    kwargs = {'dimension_numbers': dims, 'precision': lax.Precision.HIGHEST}
    ours = (
        ops.dot_general_transpose_lhs(g, x, y, **kwargs),
        ops.dot_general_transpose_rhs(g, x, y, **kwargs),
    )
    theirs = (
        fops.dot_general_transpose_lhs(g, x, y, **kwargs, preferred_element_type=None),
        fops.dot_general_transpose_rhs(g, x, y, **kwargs, preferred_element_type=None),
    )
    assert_identical(ours, theirs)
    # And they are the cotangents JAX computes (an independent check of the layout).
    for a, b in zip(ours, vjp(g)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def _qdq_program(lib, fn_name):
    fn = getattr(lib, fn_name)

    def program(x, scale, history):
        return jnp.sum(fn(jnp.float32, jnp.float8_e4m3fn, x, scale, history) ** 2)

    return jax.value_and_grad(program, argnums=(0, 1, 2))


@pytest.mark.parametrize('fn_name', ['in_qdq', 'out_qdq'])
def test_qdq_custom_vjps(fn_name):
    x = _normal(0, (3, 4), scale=20.0)
    scale = jnp.array([0.25], jnp.float32)
    history = jnp.array([30.0, 2.0, 0.0], jnp.float32)
    assert_identical(
        _qdq_program(ops, fn_name)(x, scale, history),
        _qdq_program(fops, fn_name)(x, scale, history),
    )


def test_in_q_and_out_dq():
    x = _normal(0, (3, 4), scale=20.0)
    scale = jnp.array([0.25], jnp.float32)
    history = jnp.array([30.0, 2.0, 0.0], jnp.float32)

    def program(lib):
        def f(x, scale, history):
            q, new_scale = lib.in_q(jnp.float32, jnp.float8_e4m3fn, x, scale, history)
            return jnp.sum(lib.out_dq(jnp.float32, new_scale, new_scale, q.astype(jnp.float32)))

        return jax.value_and_grad(f, argnums=(1, 2))(x, scale, history)

    assert_identical(program(ops), program(fops))
    assert_identical(
        ops.in_q(jnp.float32, jnp.float8_e4m3fn, x, scale, history),
        fops.in_q(jnp.float32, jnp.float8_e4m3fn, x, scale, history),
    )


@pytest.mark.parametrize('case', ['matmul', 'batched'])
def test_fp8_scaled_dot_general_and_grads(case):
    x_shape, y_shape, dims = DOT_DIMS[case]
    x, y = _normal(0, x_shape, 3.0), _normal(1, y_shape, 0.5)
    state = {
        'lhs_scale': jnp.array([0.5], jnp.float32),
        'rhs_scale': jnp.array([0.01], jnp.float32),
        'grad_scale': jnp.array([1.0], jnp.float32),
        'lhs_amax_history': jnp.array([4.0, 1.0], jnp.float32),
        'rhs_amax_history': jnp.array([1.0, 2.0], jnp.float32),
        'grad_amax_history': jnp.array([3.0, 0.5], jnp.float32),
    }

    def program(lib):
        def f(x, y, state):
            out = lib.fp8_scaled_dot_general(
                x, y, dims, preferred_element_type=jnp.float32, **state
            )
            return jnp.sum(jnp.sin(out))

        return jax.value_and_grad(f, argnums=(0, 1, 2))(x, y, state)

    assert_identical(program(ops), program(fops))


def test_dot_general_with_precision_jvp():
    x, y = _normal(0, (3, 4)), _normal(1, (4, 2))
    dims = (((1,), (0,)), ((), ()))
    tangents = (_normal(2, (3, 4)), _normal(3, (4, 2)))
    assert_identical(
        jax.jvp(lambda a, b: ops.dot_general_with_precision(a, b, dims), (x, y), tangents),
        jax.jvp(lambda a, b: fops.dot_general_with_precision(a, b, dims), (x, y), tangents),
    )


def test_precision_arguments_warn_as_in_flax():
    x, y = _normal(0, (3, 4)), _normal(1, (4, 2))
    dims = (((1,), (0,)), ((), ()))
    with pytest.warns(UserWarning, match='disregard any provided'):
        ops.dot_general_with_precision(x, y, dims, lax.Precision.HIGHEST)


# ----------------------------------------------------------------------------- modules


def _dense_step(lib, op_name, layer, x, **layer_kwargs):
    """Two training steps of a Dense-like layer using ``op_name``: outputs, param grads and
    the ``_overwrite_with_gradient`` values after each step (written over, as in training)."""
    op = getattr(lib, op_name)
    with warnings.catch_warnings():
        # Fp8DotGeneralOp warns (deprecated) in both libraries; checked separately.
        warnings.simplefilter('ignore', DeprecationWarning)
        model = getattr(lib, layer)(
            dot_general_cls=lambda: op(amax_history_length=3), **layer_kwargs
        )
        variables = model.init(KEYS[5], x)

        def loss(params, owg, x):
            y = model.apply({'params': params, OWG: owg}, x)
            return jnp.sum(y * y), y

        grad_fn = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)
        params, owg = variables['params'], variables[OWG]
        results = [variables]
        for step in range(2):
            (value, y), (g_params, g_owg) = grad_fn(params, owg, x * (step + 1))
            results.append((value, y, g_params, g_owg))
            owg = g_owg  # the protocol: the gradient is the new value
    return results


MODULE_CASES = {
    'direct-dense': ('Fp8DirectDotGeneralOp', 'Dense', {'features': 3}, (2, 4)),
    'alias-dense-batched': ('Fp8DotGeneral', 'Dense', {'features': 3}, (2, 5, 4)),
    'direct-densegeneral': (
        'Fp8DotGeneral',
        'DenseGeneral',
        {'features': (2, 3), 'axis': (-2, -1)},
        (2, 3, 4),
    ),
    'qdq-dense': ('Fp8DotGeneralOp', 'Dense', {'features': 3}, (2, 4)),
    'nanoo-dense': ('NANOOFp8DotGeneralOp', 'Dense', {'features': 3}, (2, 4)),
    'direct-bf16': ('Fp8DotGeneral', 'Dense', {'features': 3, 'dtype': jnp.bfloat16}, (2, 4)),
}


@pytest.mark.parametrize('case', sorted(MODULE_CASES))
def test_fp8_layers_match_flax(case):
    op_name, layer, kwargs, shape = MODULE_CASES[case]
    x = _normal(0, shape, 4.0)
    ours = _dense_step(nn, op_name, layer, x, **kwargs)
    theirs = _dense_step(fnn, op_name, layer, x, **kwargs)
    assert_identical(jax.tree_util.tree_map(jnp.asarray, dict(ours[0])), dict(theirs[0]))
    assert list(ours[0][OWG][f'{op_name}_0'] if op_name != 'Fp8DotGeneral' else ours[0][OWG]) == (
        list(theirs[0][OWG][f'{op_name}_0'] if op_name != 'Fp8DotGeneral' else theirs[0][OWG])
    )
    for mine, flax_step in zip(ours[1:], theirs[1:]):
        assert_identical(mine, flax_step)
    # The scales really moved: the amax history took this step's maximum.
    history = jax.tree_util.tree_leaves(ours[1][3])
    assert any(float(jnp.max(h)) > 0 for h in history)


def test_fp8_dot_general_op_is_deprecated_like_flax():
    with pytest.warns(DeprecationWarning, match='Fp8DotGeneralOp is deprecated'):
        fops.Fp8DotGeneralOp()
    with pytest.warns(DeprecationWarning, match='Fp8DotGeneralOp is deprecated'):
        ops.Fp8DotGeneralOp()
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        ops.NANOOFp8DotGeneralOp()


class _EinsumModel:
    """``Fp8Einsum`` used the Flax way: a child called with the equation and a kernel."""

    @staticmethod
    def build(lib):
        class Model(lib.Module):
            @lib.compact
            def __call__(self, x):
                kernel = self.param('kernel', jax.nn.initializers.lecun_normal(), (4, 3))
                return lib.Fp8Einsum(amax_history_length=2)('bsd,dk->bsk', x, kernel)

        return Model()


def test_fp8_einsum_matches_flax():
    x = _normal(0, (2, 3, 4), 2.0)

    def run(lib):
        model = _EinsumModel.build(lib)
        variables = model.init(KEYS[5], x)

        def loss(params, owg):
            y = model.apply({'params': params, OWG: owg}, x)
            return jnp.sum(jnp.sin(y)), y

        out = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(
            variables['params'], variables[OWG]
        )
        return jax.tree_util.tree_map(jnp.asarray, dict(variables)), out

    ours, theirs = run(nn), run(fnn)
    assert_identical(ours, theirs)
