"""fp8 delayed scaling against hand-computed values (Flax is the oracle in integration_tests)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.layers import Dense, Fp8DotGeneral, fp8_ops
from linen.layers.errors import LayerArgumentError


def test_compute_scale_and_history_by_hand():
    scale = jnp.array([2.0], jnp.float32)
    assert float(fp8_ops.compute_scale(jnp.float32(896.0), scale, 448.0)[0]) == 2.0
    assert float(fp8_ops.compute_scale(jnp.float32(896.0), scale, 448.0, margin=1)[0]) == 4.0
    # A zero or infinite amax keeps the previous scale.
    assert float(fp8_ops.compute_scale(jnp.float32(0.0), scale, 448.0)[0]) == 2.0
    assert float(fp8_ops.compute_scale(jnp.float32(jnp.inf), scale, 448.0)[0]) == 2.0
    history = jnp.array([1.0, 2.0, 3.0], jnp.float32)
    new = fp8_ops.compute_amax_history(jnp.array([[-7.0, 5.0]]), history)
    np.testing.assert_array_equal(new, [7.0, 3.0, 1.0])


def test_quantize_clips_to_the_fp8_range():
    x = jnp.array([1000.0, -1000.0, 3.0], jnp.float32)
    q = fp8_ops.quantize(x, jnp.float8_e4m3fn, jnp.array([1.0]), jnp.float32)
    np.testing.assert_array_equal(q.astype(jnp.float32), [448.0, -448.0, 3.0])
    np.testing.assert_array_equal(
        fp8_ops.dequantize(q, jnp.float32, jnp.array([0.5])), [224.0, -224.0, 1.5]
    )
    with pytest.raises(LayerArgumentError, match='float32 is not an fp8 dtype'):
        fp8_ops.get_fp8_max(jnp.float32, jnp.float32)


def test_overwrite_with_gradient_protocol():
    x = jnp.array([[2.0, -4.0, 1.0]], jnp.float32)
    layer = Dense(2, dot_general_cls=lambda: Fp8DotGeneral(amax_history_length=2))
    variables = layer.init(jax.random.key(0), x)
    owg = variables['_overwrite_with_gradient']['Fp8DirectDotGeneralOp_0']
    np.testing.assert_array_equal(owg['input_scale'], [1.0])
    np.testing.assert_array_equal(owg['input_amax_history'], [0.0, 0.0])

    def loss(owg):
        y = layer.apply({**variables, '_overwrite_with_gradient': owg}, x)
        return jnp.sum(y)

    grads = jax.grad(loss)(variables['_overwrite_with_gradient'])
    g = grads['Fp8DirectDotGeneralOp_0']
    # The "gradient" is the new state: this step's amax of the input enters the history;
    # the scale comes from the history before it (all zeros, so it is kept).
    np.testing.assert_array_equal(g['input_amax_history'], [4.0, 0.0])
    np.testing.assert_array_equal(g['input_scale'], [1.0])
    np.testing.assert_array_equal(g['output_grad_amax_history'], [1.0, 0.0])
