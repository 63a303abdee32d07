"""Lifted vjp, jvp, grad, value_and_grad and custom_vjp, checked against the math."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import linen.nn as nn


class LearnScale(nn.Module):
    @nn.compact
    def __call__(self, x, y):
        p = self.param('scale', nn.initializers.ones, ())
        return p * x * y


class Dense(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        w = self.param('w', lambda k, s: jax.random.normal(k, s), (x.shape[-1], self.features))
        return x @ w


X = jnp.array([1.0, 2.0, 3.0])
Y = jnp.array([4.0, -5.0, 6.0])
P = jnp.array(3.0)  # the scale used in apply


def test_vjp_gives_variable_and_input_cotangents():
    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x, y):
            z, bwd = nn.vjp(lambda mdl, x, y: mdl(x, y), LearnScale(), x, y)
            params_grad, x_grad, y_grad = bwd(jnp.ones(z.shape))
            return z, params_grad, x_grad, y_grad

    variables = Foo().init(jax.random.key(0), X, Y)
    assert float(variables['params']['LearnScale_0']['scale']) == 1.0
    variables = {'params': {'LearnScale_0': {'scale': P}}}
    z, params_grad, x_grad, y_grad = Foo().apply(variables, X, Y)
    np.testing.assert_allclose(z, P * X * Y)
    np.testing.assert_allclose(params_grad['params']['scale'], jnp.sum(X * Y))
    np.testing.assert_allclose(x_grad, P * Y)
    np.testing.assert_allclose(y_grad, P * X)


def test_vjp_with_aux_and_no_variable_cotangents():
    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x, y):
            def f(mdl, x, y):
                z = mdl(x, y)
                return z, jnp.max(z)

            z, bwd, aux = nn.vjp(f, LearnScale(), x, y, has_aux=True, vjp_variables=False)
            return aux, bwd(jnp.ones(z.shape))

    variables = {'params': {'LearnScale_0': {'scale': P}}}
    aux, (var_grads, x_grad, y_grad) = Foo().apply(variables, X, Y)
    assert float(aux) == float(jnp.max(P * X * Y))
    assert var_grads == {}
    np.testing.assert_allclose(x_grad, P * Y)


def test_value_and_grad_and_grad_are_with_respect_to_the_inputs():
    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x, y):
            def f(mdl, x, y):
                return mdl(x, y).sum()

            value, grads = nn.value_and_grad(f, LearnScale(), x, y)
            return value, grads, nn.grad(f, LearnScale(name='other'), x, y)

    variables = {'params': {'LearnScale_0': {'scale': P}, 'other': {'scale': 2 * P}}}
    value, (gx, gy), (hx, hy) = Foo().apply(variables, X, Y)
    np.testing.assert_allclose(value, jnp.sum(P * X * Y))
    np.testing.assert_allclose(gx, P * Y)
    np.testing.assert_allclose(gy, P * X)
    np.testing.assert_allclose(hx, 2 * P * Y)
    np.testing.assert_allclose(hy, 2 * P * X)


def test_grad_with_aux():
    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x, y):
            def f(mdl, x, y):
                z = mdl(x, y)
                return z.sum(), z

            return nn.grad(f, LearnScale(), x, y, has_aux=True)

    variables = {'params': {'LearnScale_0': {'scale': P}}}
    (gx, gy), aux = Foo().apply(variables, X, Y)
    np.testing.assert_allclose(aux, P * X * Y)
    np.testing.assert_allclose(gx, P * Y)


def test_jvp_with_variable_tangents():
    class Scale(nn.Module):
        @nn.compact
        def __call__(self, x):
            p = self.param('scale', nn.initializers.ones, ())
            return p * x

    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x, t):
            scale = Scale()
            y, y_t = nn.jvp(
                lambda mdl, x: mdl(x),
                scale,
                (x,),
                (t,),
                variable_tangents={'params': {'scale': jnp.array(1.0)}},
            )
            return y, y_t

    variables = {'params': {'Scale_0': {'scale': P}}}
    t = jnp.array([0.5, 0.0, -1.0])
    y, y_t = Foo().apply(variables, X, t)
    np.testing.assert_allclose(y, P * X)
    # d(p x) = dp x + p dx
    np.testing.assert_allclose(y_t, 1.0 * X + P * t)


def test_custom_vjp_replaces_the_backward_pass():
    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x):
            def f(mdl, x):
                return mdl(x)

            def fwd(mdl, x):
                return nn.vjp(f, mdl, x)

            def bwd(vjp_fn, y_t):
                params_t, *inputs_t = vjp_fn(y_t)
                params_t = jax.tree_util.tree_map(jnp.sign, params_t)
                return (params_t, *inputs_t)

            sign_grad = nn.custom_vjp(f, forward_fn=fwd, backward_fn=bwd)
            return sign_grad(Dense(1), x).reshape(())

    x = jnp.array([1.0, -2.0])
    variables = Foo().init(jax.random.key(0), x)
    w = variables['params']['Dense_0']['w']
    np.testing.assert_allclose(Foo().apply(variables, x), (x @ w)[0], rtol=1e-6)
    grads = jax.grad(Foo().apply)(variables, x)
    # the true gradient of x @ w wrt w is x; the custom backward keeps only its sign
    np.testing.assert_array_equal(grads['params']['Dense_0']['w'], jnp.sign(x)[:, None])
    gx = jax.grad(lambda x: Foo().apply(variables, x))(x)
    np.testing.assert_allclose(gx, w[:, 0], rtol=1e-6)


def test_custom_vjp_nondiff_argnums_count_the_module_as_zero():
    """``f(mdl, x, scale)``: ``scale`` is argument 2 (Flax's counting); the backward
    pass gets it first and it has no cotangent."""

    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x):
            def f(mdl, x, scale):
                return mdl(x) * scale

            def fwd(mdl, x, scale):
                return nn.vjp(lambda m, x: f(m, x, scale), mdl, x)

            def bwd(scale, vjp_fn, y_t):
                params_t, *inputs_t = vjp_fn(y_t)
                params_t = jax.tree_util.tree_map(lambda t: jnp.sign(t) * scale, params_t)
                return (params_t, *inputs_t)

            sign_grad = nn.custom_vjp(f, forward_fn=fwd, backward_fn=bwd, nondiff_argnums=(2,))
            return sign_grad(Dense(1), x, 4.0).reshape(())

    x = jnp.array([1.0, -2.0])
    variables = Foo().init(jax.random.key(0), x)
    w = variables['params']['Dense_0']['w']
    np.testing.assert_allclose(Foo().apply(variables, x), 4.0 * (x @ w)[0], rtol=1e-6)
    grads = jax.grad(Foo().apply)(variables, x)
    np.testing.assert_array_equal(grads['params']['Dense_0']['w'], 4.0 * jnp.sign(x)[:, None])


def test_autodiff_threads_mutable_state():
    class Counting(nn.Module):
        @nn.compact
        def __call__(self, x):
            n = self.variable('counter', 'n', lambda: jnp.zeros((), jnp.int32))
            n.value = n.value + 1
            return jnp.sum(x**2)

    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.grad(lambda mdl, x: mdl(x), Counting(), x)

    (g,), variables = Foo().init_with_output(jax.random.key(0), X)
    np.testing.assert_allclose(g, 2 * X)
    assert int(variables['counter']['Counting_0']['n']) == 1
    _, upd = Foo().apply(variables, X, mutable='counter')
    assert int(upd['counter']['Counting_0']['n']) == 2
