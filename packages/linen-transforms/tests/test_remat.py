"""Lifted remat/checkpoint and remat_scan: outputs, gradients, static args, policy, errors."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import errors
from linen.transforms.errors import (
    RematConcreteArgumentError,
    RematStaticArgnumsError,
    TransformArgumentError,
)


def normal_init(key, shape):
    return jax.random.normal(key, shape) * 0.5


class Dense(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        w = self.param('w', normal_init, (x.shape[-1], self.features))
        b = self.param('b', normal_init, (self.features,))
        return x @ w + b.reshape((1,) * (x.ndim - 1) + b.shape)


class MLP(nn.Module):
    features: tuple = (3, 4, 5)

    @nn.compact
    def __call__(self, x):
        for i, f in enumerate(self.features):
            x = Dense(f, name=f'layers_{i}')(x)
            if i != len(self.features) - 1:
                x = jnp.sin(x)
        return x


class RematMLP(nn.Module):
    features: tuple = (3, 4, 5)

    @nn.remat
    @nn.compact
    def __call__(self, x):
        for i, f in enumerate(self.features):
            x = Dense(f, name=f'layers_{i}')(x)
            if i != len(self.features) - 1:
                x = jnp.sin(x)
        return x


X = jax.random.uniform(jax.random.key(1), (4, 4))


def sum_of_squares(module, variables, x):
    return jnp.sum(module.apply(variables, x) ** 2)


@pytest.mark.parametrize('make', [lambda: RematMLP(), lambda: nn.remat(MLP)()])
def test_same_params_outputs_and_gradients_as_without_remat(make):
    model = make()
    variables = model.init(jax.random.key(2), X)
    plain = MLP().init(jax.random.key(2), X)
    assert jax.tree_util.tree_structure(variables) == jax.tree_util.tree_structure(plain)
    for a, b in zip(jax.tree_util.tree_leaves(variables), jax.tree_util.tree_leaves(plain)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(model.apply(variables, X), MLP().apply(plain, X), rtol=1e-6)
    g = jax.grad(lambda v: sum_of_squares(model, v, X))(variables)
    g_ref = jax.grad(lambda v: sum_of_squares(MLP(), v, X))(plain)
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(g_ref)):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_the_backward_pass_recomputes_under_a_checkpoint():
    model = RematMLP()
    variables = model.init(jax.random.key(2), X)
    jaxpr = jax.make_jaxpr(jax.grad(lambda v: sum_of_squares(model, v, X)))(variables)
    names = {eqn.primitive.name for eqn in jaxpr.jaxpr.eqns}
    assert names & {'checkpoint', 'remat', 'remat2'}, names


def _checkpoint_eqns(jaxpr):
    return [e for e in jaxpr.jaxpr.eqns if e.primitive.name in ('checkpoint', 'remat', 'remat2')]


def test_policy_and_prevent_cse_reach_jax_checkpoint():
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    model = nn.remat(MLP, policy=policy, prevent_cse=False)()
    variables = model.init(jax.random.key(2), X)
    jaxpr = jax.make_jaxpr(lambda v: model.apply(v, X))(variables)
    (eqn,) = _checkpoint_eqns(jaxpr)
    assert eqn.params['policy'] is policy
    assert eqn.params['prevent_cse'] is False
    g = jax.grad(lambda v: sum_of_squares(model, v, X))(variables)
    g_ref = jax.grad(lambda v: sum_of_squares(MLP(), v, X))(variables)
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(g_ref)):
        np.testing.assert_allclose(a, b, rtol=1e-5)


class Gated(nn.Module):
    @nn.compact
    def __call__(self, x, train):
        y = Dense(4)(x)
        if train:  # Python control flow on the static argument
            y = y * 2.0
        return y


@pytest.mark.parametrize(
    'kwargs', [{'static_argnums': (2,)}, {'static_argnums': 2}, {'static_call_argnums': (1,)}]
)
def test_static_argnums_count_self_as_flax_and_static_call_argnums_do_not(kwargs):
    model = nn.remat(Gated, **kwargs)()
    variables = model.init(jax.random.key(0), X, True)
    y_train = model.apply(variables, X, True)
    y_eval = model.apply(variables, X, False)
    ref = Gated().apply(variables, X, False)
    np.testing.assert_allclose(y_eval, ref, rtol=1e-6)
    np.testing.assert_allclose(y_train, 2 * ref, rtol=1e-6)


def test_static_argnums_on_a_decorated_method():
    class GatedMethod(nn.Module):
        @functools.partial(nn.remat, static_argnums=(2,))
        @nn.compact
        def __call__(self, x, train):
            y = Dense(4)(x)
            return y * 2.0 if train else y

    variables = GatedMethod().init(jax.random.key(0), X, True)
    ref = Gated().apply(variables, X, False)
    np.testing.assert_allclose(GatedMethod().apply(variables, X, False), ref, rtol=1e-6)
    np.testing.assert_allclose(GatedMethod().apply(variables, X, True), 2 * ref, rtol=1e-6)


def test_without_static_argnums_python_control_flow_on_a_traced_argument_fails():
    model = nn.remat(Gated)()
    with pytest.raises(jax.errors.TracerBoolConversionError):
        model.init(jax.random.key(0), X, True)


def test_mutable_collections_and_rngs_thread_through_remat():
    class Stateful(nn.Module):
        @nn.compact
        def __call__(self, x):
            n = self.variable('counter', 'n', lambda: jnp.zeros((), jnp.int32))
            n.value = n.value + 1
            self.sow('intermediates', 'x', x)
            return x + jax.random.uniform(self.make_rng('dropout'), x.shape)

    rngs = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}
    plain_y, plain_v = Stateful().init_with_output(rngs, X)
    y, variables = nn.remat(Stateful)().init_with_output(rngs, X)
    np.testing.assert_array_equal(y, plain_y)  # same dropout key derivation
    assert int(variables['counter']['n']) == 1
    assert 'intermediates' not in variables  # init leaves them out, as without remat
    _, upd = nn.remat(Stateful)().apply(
        {'counter': variables['counter']},
        X,
        rngs={'dropout': jax.random.key(1)},
        mutable=['counter', 'intermediates'],
    )
    assert int(upd['counter']['n']) == 2
    np.testing.assert_array_equal(upd['intermediates']['x'][0], X)
    assert int(plain_v['counter']['n']) == 1


def test_concrete_true_is_flaxs_not_implemented_error():
    with pytest.raises(RematConcreteArgumentError, match='concrete=True') as info:
        nn.remat(MLP, concrete=True)
    assert str(info.value).startswith(
        'The concrete argument is deprecated. Use static_argnums instead.'
    )
    assert isinstance(info.value, NotImplementedError)
    assert isinstance(info.value, TransformArgumentError)  # as linen raised before


def test_checkpoint_is_remat():
    assert nn.checkpoint is nn.remat


def test_remat_of_a_non_module_is_a_target_error():
    with pytest.raises(errors.TransformTargetError, match='not a Module class or callable: 3'):
        nn.remat(3)


# --------------------------------------------------------------- remat_scan


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        w = self.param('w', normal_init, (x.shape[-1], x.shape[-1]))
        return jnp.tanh(x @ w)


def test_remat_scan_stacks_params_per_level_and_applies_the_body_prod_times():
    model = nn.remat_scan(Block, lengths=(2, 3))()
    x = jax.random.normal(jax.random.key(1), (2, 4))
    variables = model.init(jax.random.key(0), x)
    w = variables['params']['w']
    assert w.shape == (2, 3, 4, 4)
    flat = w.reshape(6, 4, 4)
    assert len({bytes(np.asarray(m)) for m in flat}) == 6  # split rngs: six distinct blocks
    expected = x
    for i in range(6):
        expected = jnp.tanh(expected @ flat[i])
    # float32, four matmuls deep: an element near zero keeps an absolute error of a few ulp
    # of the O(1) terms it was summed from, so the tolerance is absolute as well.
    np.testing.assert_allclose(model.apply(variables, x), expected, rtol=1e-5, atol=1e-6)

    g = jax.grad(lambda w: jnp.sum(model.apply({'params': {'w': w}}, x)))(w)

    def ref(w):
        y = x
        for i in range(6):
            y = jnp.tanh(y @ w.reshape(6, 4, 4)[i])
        return jnp.sum(y)

    np.testing.assert_allclose(g, jax.grad(ref)(w), rtol=1e-4, atol=1e-6)


def test_remat_scan_with_broadcast_params_shares_one_block():
    model = nn.remat_scan(
        Block,
        lengths=(2, 2),
        variable_broadcast='params',
        variable_axes={},
        split_rngs={'params': False},
    )()
    x = jax.random.normal(jax.random.key(1), (2, 4))
    variables = model.init(jax.random.key(0), x)
    w = variables['params']['w']
    assert w.shape == (4, 4)
    expected = x
    for _ in range(4):
        expected = jnp.tanh(expected @ w)
    # float32, four matmuls deep: an element near zero keeps an absolute error of a few ulp
    # of the O(1) terms it was summed from, so the tolerance is absolute as well.
    np.testing.assert_allclose(model.apply(variables, x), expected, rtol=1e-5, atol=1e-6)


# Flax hands static_argnums to jax.checkpoint as `i + 1`, over two arguments of its own
# and the call's: `module(x, train)` gives len(args) = 4, so i + 1 must lie in [-4, 4).
@pytest.mark.parametrize(('static_argnums', 'got'), [((5,), (6,)), (3, (4,)), ((1, -6), (2, -5))])
def test_static_argnums_past_the_call_raise_jax_value_error_at_the_call(static_argnums, got):
    model = nn.remat(Gated, static_argnums=static_argnums)()  # declared: nothing checked yet
    with pytest.raises(RematStaticArgnumsError) as info:
        model.init(jax.random.key(0), X, True)
    # JAX's own words for those numbers (they differ between JAX versions).
    with pytest.raises(ValueError) as jax_error:
        jax.checkpoint(lambda *a: 0, static_argnums=got)(*[None] * 4)
    assert str(info.value).startswith(str(jax_error.value).rstrip('.'))
    assert isinstance(info.value, ValueError) and isinstance(info.value, TransformArgumentError)


def test_a_static_argument_passed_by_keyword_has_no_position():
    model = nn.remat(Gated, static_argnums=(2,))()
    variables = model.init(jax.random.key(0), X, True)
    with pytest.raises(RematStaticArgnumsError, match=r'got \(3,\), while `len\(args\)` = 3'):
        model.apply(variables, X, train=True)


def test_a_static_index_past_a_defaulted_argument_left_out_raises():
    class Defaulted(nn.Module):
        @nn.compact
        def __call__(self, x, train, scale=None):
            return Gated()(x, train)

    model = nn.remat(Defaulted, static_argnums=(2, 3))()
    variables = model.init(jax.random.key(0), X, True, None)  # passed: fine
    with pytest.raises(RematStaticArgnumsError, match=r'got \(3, 4\)'):
        model.apply(variables, X, True)


def test_static_argnums_on_a_decorated_method_are_checked_at_the_call():
    class Bad(nn.Module):  # defining it raises nothing, as in Flax
        @functools.partial(nn.remat, static_argnums=(2,))
        def __call__(self, x):
            return x

    with pytest.raises(RematStaticArgnumsError, match=r'got \(3,\), while `len\(args\)` = 3'):
        Bad().init(jax.random.key(0), X)


def test_static_call_argnums_past_the_arguments_is_refused_where_declared():
    with pytest.raises(
        TransformArgumentError, match=r'past the arguments of Gated.__call__\(x, train\)'
    ):
        nn.remat(Gated, static_call_argnums=(2,))
    with pytest.raises(TransformArgumentError, match=r'range\(-1, 1\)'):

        class Bad(nn.Module):
            @functools.partial(nn.remat, static_call_argnums=(1,))
            def __call__(self, x):
                return x


def test_static_call_argnums_within_the_arguments_or_after_star_args_is_accepted():
    class Star(nn.Module):
        def __call__(self, *args):
            return args[0]

    nn.remat(Gated, static_call_argnums=(-1, 0))
    nn.remat(Star, static_call_argnums=(7,))
    assert issubclass(TransformArgumentError, ValueError)  # Flax's `except ValueError` holds


@pytest.mark.parametrize('static_argnums', [(0,), -1, (-4,), (-5,)])
def test_flax_indices_of_its_own_arguments_mark_nothing(static_argnums):
    # 0 is `self`; -1, -4 and -5 land on the two arguments Flax passes first.
    with pytest.raises(jax.errors.TracerBoolConversionError):
        nn.remat(Gated, static_argnums=static_argnums)().init(jax.random.key(0), X, True)


@pytest.mark.parametrize('static_argnums', [(0, 2), -2, (1, 2)])
def test_flax_negative_indices_count_past_flax_own_arguments(static_argnums):
    # -2 is the last argument (Flax's shift by one); `x` static too is harmless.
    model = nn.remat(Gated, static_argnums=static_argnums)()
    variables = model.init(jax.random.key(0), X, True)
    ref = Gated().apply(variables, X, False)
    np.testing.assert_allclose(model.apply(variables, X, True), 2 * ref, rtol=1e-6)
