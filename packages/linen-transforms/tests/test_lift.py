"""The functional lift API over Scope (``linen.transforms.lift``, as ``flax.core.lift``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linen.core import apply, init
from linen.transforms import lift
from linen.transforms.errors import ScanLengthError, TransformAxisSizeError


def dense(scope, x, features=2):
    w = scope.param('w', lambda k, s: jax.random.normal(k, s), (x.shape[-1], features))
    return x @ w


def test_vmap_over_a_scope_stacks_params():
    def model(scope, xs):
        stacked = lift.vmap(dense, variable_axes={'params': 0}, split_rngs={'params': True})
        return stacked(scope.push('dense'), xs)

    xs = jax.random.normal(jax.random.key(1), (3, 4))
    y, variables = init(model)(jax.random.key(0), xs)
    w = variables['params']['dense']['w']
    assert w.shape == (3, 4, 2)
    np.testing.assert_allclose(y, jnp.einsum('bi,bio->bo', xs, w), rtol=1e-6)
    np.testing.assert_allclose(apply(model)(variables, xs), y, rtol=1e-6)


def test_vmap_without_axis_size_raises():
    def model(scope, x):
        f = lift.vmap(dense, variable_axes={'params': 0}, split_rngs={'params': True}, in_axes=None)
        return f(scope, x)

    with pytest.raises(TransformAxisSizeError, match='axis_size should be specified manually'):
        init(model)(jax.random.key(0), jnp.ones((4,)))


def step(scope, c, x):
    w = scope.param('w', lambda k, s: jax.random.normal(k, s) * 0.5, (c.shape[-1],) * 2)
    c = jnp.tanh(c @ w + x)
    return c, c


def test_scan_over_a_scope_with_broadcast_params():
    def model(scope, c, xs):
        f = lift.scan(step, variable_broadcast='params', split_rngs={'params': False})
        return f(scope, c, xs)

    xs = jax.random.normal(jax.random.key(1), (4, 3))
    (c, ys), variables = init(model)(jax.random.key(0), jnp.zeros(3), xs)
    w = variables['params']['w']
    assert w.shape == (3, 3)
    c_ref = jnp.zeros(3)
    for t in range(4):
        c_ref = jnp.tanh(c_ref @ w + xs[t])
        np.testing.assert_allclose(ys[t], c_ref, rtol=1e-5)
    np.testing.assert_allclose(c, c_ref, rtol=1e-5)


def test_scan_length_mismatch_raises():
    def two(scope, c, x, y):
        return c, x + y

    with pytest.raises(ScanLengthError, match='different leading axis sizes: 2, 3'):
        apply(lift.scan(two))({}, 0.0, jnp.ones(2), jnp.ones(3))


def test_remat_and_jit_over_a_scope_match_the_plain_function():
    x = jax.random.normal(jax.random.key(1), (2, 4))
    plain_y, plain_vars = init(dense)(jax.random.key(0), x)
    # Flax's lift.jit takes a static hash key after the scope and hands it on.
    jitted = lift.jit(lambda scope, hash_key, x: dense(scope, x))
    for transformed in (
        lift.remat(dense),
        lift.checkpoint(dense),
        lambda scope, x: jitted(scope, None, x),
    ):
        y, variables = init(transformed)(jax.random.key(0), x)
        np.testing.assert_array_equal(variables['params']['w'], plain_vars['params']['w'])
        np.testing.assert_allclose(y, plain_y, rtol=1e-6)


def test_jit_static_argnums_over_a_scope():
    calls = []

    def f(scope, hash_key, x, power):
        calls.append(power)
        return x**power

    # Flax's count: the scope is 0 and the hash key is not counted, so `power` is 2.
    jitted = lift.jit(f, static_argnums=(2,))

    def run(scope, x, power):
        return jitted(scope, 'key', x, power)

    assert float(apply(run)({}, jnp.array(2.0), 3)) == 8.0
    n = len(calls)
    assert float(apply(run)({}, jnp.array(3.0), 3)) == 27.0
    assert len(calls) == n  # same static argument: no retrace
    assert float(apply(run)({}, jnp.array(2.0), 2)) == 4.0
    assert set(calls) == {3, 2}


def test_vjp_and_value_and_grad_over_a_scope():
    def scale(scope, x):
        p = scope.param('p', lambda k, s: jnp.full(s, 3.0), ())
        return p * x

    def model(scope, x):
        y, bwd = lift.vjp(scale, scope, x)
        var_grads, x_grad = bwd(jnp.ones_like(y))
        value, (gx,) = lift.value_and_grad(lambda s, x: jnp.sum(scale(s, x) ** 2), scope, x)
        return var_grads, x_grad, value, gx

    x = jnp.array([1.0, 2.0])
    # in apply the params exist before the vjp, so they receive a cotangent
    var_grads, x_grad, value, gx = apply(model)({'params': {'p': jnp.array(3.0)}}, x)
    np.testing.assert_allclose(var_grads['params']['p'], jnp.sum(x))
    np.testing.assert_allclose(x_grad, [3.0, 3.0])
    np.testing.assert_allclose(value, jnp.sum((3 * x) ** 2))
    np.testing.assert_allclose(gx, 2 * 9 * x)


def test_cond_and_while_loop_over_a_scope():
    def model(scope, x, pred):
        y = lift.cond(pred, lambda s, x: x + 1, lambda s, x: x - 1, scope, x)

        def body(s, c):
            n = s.variable('state', 'n', lambda: jnp.array(0))
            n.value = n.value + 1
            return c * 2

        out = lift.while_loop(
            lambda s, c: c < 100, body, scope, jnp.array(1.0), carry_variables='state'
        )
        return y, out

    (y, out), state = apply(model, mutable='state')(
        {'state': {'n': jnp.array(0)}}, jnp.array(5.0), True
    )
    assert float(y) == 6.0 and float(out) == 128.0
    assert int(state['state']['n']) == 7


def test_map_variables_over_a_scope():
    f = lift.map_variables(dense, 'params', lambda v: jax.tree_util.tree_map(jnp.abs, v))
    x = jnp.array([[1.0, -1.0]])
    variables = init(dense)(jax.random.key(0), x)[1]
    np.testing.assert_allclose(
        apply(f)(variables, x), x @ jnp.abs(variables['params']['w']), rtol=1e-6
    )


def test_lift_surface():
    assert lift.broadcast is not None
    for name in lift.__all__:
        assert callable(getattr(lift, name)) or name == 'broadcast'
