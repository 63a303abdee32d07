"""Lifted jit: same params as un-jitted, trace caching, static args, rng counters, collections."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import errors
from linen.transforms.errors import TransformArgumentError

TRACES: list[str] = []


def normal_init(key, shape):
    return jax.random.normal(key, shape)


class Dense(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        TRACES.append(self.name or 'Dense')  # runs once per trace under jit
        w = self.param('w', normal_init, (x.shape[-1], self.features))
        b = self.param('b', normal_init, (self.features,))
        return x @ w + b.reshape((1,) * (x.ndim - 1) + b.shape)


class MLP(nn.Module):
    features: tuple = (3, 4, 5)
    jit: bool = True

    @nn.compact
    def __call__(self, x):
        layer = nn.jit(Dense) if self.jit else Dense
        for i, f in enumerate(self.features):
            x = layer(f, name=f'layers_{i}')(x)
            if i != len(self.features) - 1:
                x = jnp.sin(x)
        return x


X = jax.random.uniform(jax.random.key(1), (4, 4))


@pytest.fixture(autouse=True)
def _clear_traces():
    TRACES.clear()


def leaves_equal(a, b):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(x, y)


def test_same_parameters_and_outputs_as_without_jit():
    # Flax's nn.jit changes the parameters a key gives; ours does not.
    jitted = MLP().init(jax.random.key(3), X)
    plain = MLP(jit=False).init(jax.random.key(3), X)
    leaves_equal(jitted, plain)
    np.testing.assert_allclose(MLP().apply(jitted, X), MLP(jit=False).apply(plain, X), rtol=1e-6)


def test_gradients_equal_the_unjitted_module():
    variables = MLP(jit=False).init(jax.random.key(3), X)

    def loss(model, v):
        return jnp.sum(model.apply(v, X) ** 2)

    g = jax.grad(functools.partial(loss, MLP()))(variables)
    g_ref = jax.grad(functools.partial(loss, MLP(jit=False)))(variables)
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(g_ref)):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_second_call_with_the_same_attributes_does_not_retrace():
    model = nn.jit(Dense)(3)
    variables = model.init(jax.random.key(0), X)
    TRACES.clear()
    y1 = model.apply(variables, X)
    n = len(TRACES)
    assert n >= 1  # (an implementation may add an abstract pre-trace per cache entry)
    y2 = model.apply(variables, X + 1)
    assert len(TRACES) == n
    p = variables['params']
    np.testing.assert_allclose(y2, (X + 1) @ p['w'] + p['b'][None], rtol=1e-6)
    np.testing.assert_allclose(y1, X @ p['w'] + p['b'][None], rtol=1e-6)


def test_jit_inside_a_compact_method_compiles_once_across_applies():
    variables = MLP(features=(6, 7)).init(jax.random.key(0), X)
    TRACES.clear()
    MLP(features=(6, 7)).apply(variables, X)
    n = len(TRACES)
    assert set(TRACES) == {'layers_0', 'layers_1'}
    MLP(features=(6, 7)).apply(variables, X + 1)
    assert len(TRACES) == n


def test_changed_attributes_retrace():
    variables = nn.jit(Dense)(9).init(jax.random.key(0), X)
    TRACES.clear()
    nn.jit(Dense)(9).apply(variables, X)
    n = len(TRACES)
    nn.jit(Dense)(9).apply(variables, X)
    assert len(TRACES) == n
    v5 = nn.jit(Dense)(11).init(jax.random.key(0), X)
    n = len(TRACES)
    y = nn.jit(Dense)(11).apply(v5, X)
    assert len(TRACES) > n and y.shape == (4, 11)


def test_same_class_at_ten_paths_compiles_once():
    """Profiling labels off: the path is not in the cache key (the rng hashes are traced)."""

    class Tower(nn.Module):
        jitted: bool = True

        @nn.compact
        def __call__(self, x):
            for i in range(10):
                layer = nn.jit(Dense) if self.jitted else Dense
                x = layer(4, name=f'layers_{i}')(x)
            return x

    x = jnp.ones((2, 4))
    labels_off = pytest.importorskip('linen.profiling').override_named_call(False)
    with labels_off:
        variables = Tower().init(jax.random.key(0), x)
        TRACES.clear()
        Tower().apply(variables, x)
    assert len(TRACES) == 1
    # and every layer got the parameters the un-jitted tower gives for the key
    plain = Tower(jitted=False).init(jax.random.key(0), x)
    jax.tree_util.tree_map(np.testing.assert_array_equal, variables, plain)


class Scaled(nn.Module):
    @nn.compact
    def __call__(self, x, power, *, mode='add'):
        TRACES.append(f'{power}-{mode}')
        w = self.param('w', nn.initializers.ones, x.shape[-1:])
        y = x * w.reshape((1,) * (x.ndim - 1) + w.shape)
        for _ in range(power):  # Python control flow: `power` must be static
            y = y * 2
        return y + 1 if mode == 'add' else y - 1


def test_static_argnums_and_static_argnames():
    model = nn.jit(Scaled, static_argnums=(2,), static_argnames=('mode',))()
    variables = model.init(jax.random.key(0), X, 2, mode='add')
    calls = [(2, 'add', X * 4 + 1), (3, 'add', X * 8 + 1), (3, 'sub', X * 8 - 1)]
    for power, mode, expected in calls:
        TRACES.clear()
        y = model.apply(variables, X, power, mode=mode)
        np.testing.assert_allclose(y, expected, rtol=1e-6)
        # a new (power, mode) traces, with those values as Python constants
        assert TRACES and set(TRACES) == {f'{power}-{mode}'}
    TRACES.clear()
    for power, mode, expected in calls:  # repeated combinations reuse their traces
        np.testing.assert_allclose(model.apply(variables, X, power, mode=mode), expected)
    assert TRACES == []


def test_a_traced_argument_cannot_drive_python_control_flow():
    model = nn.jit(Scaled)()
    with pytest.raises(jax.errors.TracerIntegerConversionError):
        model.init(jax.random.key(0), X, jnp.array(2))


@pytest.mark.filterwarnings('ignore:Some donated buffers were not usable')
def test_donate_argnums_is_accepted():
    model = nn.jit(Dense, donate_argnums=(0,))(3)
    variables = model.init(jax.random.key(0), X)
    p = variables['params']
    y = model.apply(variables, jnp.array(X))
    np.testing.assert_allclose(y, X @ p['w'] + p['b'][None], rtol=1e-6)


class Noise(nn.Module):
    @nn.compact
    def __call__(self, x):
        return x + jax.random.uniform(self.make_rng('dropout'), x.shape)


class TwoDrops(nn.Module):
    jit: bool = True

    @nn.compact
    def __call__(self, x):
        drop = nn.jit(Noise)(name='drop') if self.jit else Noise(name='drop')
        return drop(x), drop(x)


def test_rng_counters_continue_across_calls_like_unjitted():
    rngs = {'dropout': jax.random.key(7)}
    a, b = TwoDrops().apply({}, X, rngs=rngs)
    assert not bool(jnp.array_equal(a, b))
    a_ref, b_ref = TwoDrops(jit=False).apply({}, X, rngs=rngs)
    np.testing.assert_array_equal(a, a_ref)
    np.testing.assert_array_equal(b, b_ref)


class Stateful(nn.Module):
    @nn.compact
    def __call__(self, x):
        mean = self.variable('batch_stats', 'mean', jnp.zeros, x.shape[-1:])
        n = self.variable('counter', 'n', lambda: jnp.zeros((), jnp.int32))
        if not self.is_initializing():
            mean.value = 0.9 * mean.value + 0.1 * x.mean(0)
            n.value = n.value + 1
        self.sow('intermediates', 'x', x)
        return x - mean.value.reshape((1,) * (x.ndim - 1) + mean.value.shape)


def test_mutable_collections_thread_through_jit():
    model = nn.jit(Stateful)()
    variables = model.init(jax.random.key(0), X)
    y, upd = model.apply(variables, X, mutable=['batch_stats', 'counter', 'intermediates'])
    np.testing.assert_allclose(upd['batch_stats']['mean'], 0.1 * X.mean(0), rtol=1e-6)
    np.testing.assert_allclose(y, X - 0.1 * X.mean(0, keepdims=True), rtol=1e-6)
    assert int(upd['counter']['n']) == 1
    np.testing.assert_array_equal(upd['intermediates']['x'][0], X)
    _, upd2 = model.apply({**variables, **upd}, X, mutable=['batch_stats', 'counter'])
    assert int(upd2['counter']['n']) == 2
    np.testing.assert_allclose(upd2['batch_stats']['mean'], 0.19 * X.mean(0), rtol=1e-6)


def test_immutable_apply_leaves_state_alone():
    model = nn.jit(Stateful)()
    variables = model.init(jax.random.key(0), X)
    with pytest.raises(errors.ModifyScopeVariableError):
        model.apply(variables, X)


def test_method_decorator_and_methods_argument():
    class Twice(nn.Module):
        @nn.jit
        @nn.compact
        def __call__(self, x):
            TRACES.append('call')
            return Dense(3, name='d')(x) * 2

    class WithEncode(nn.Module):
        @nn.compact
        def __call__(self, x):
            return self.encode(x)

        def encode(self, x):
            TRACES.append('encode')
            return x * 3

    variables = Twice().init(jax.random.key(0), X)
    plain = Dense(3).init(jax.random.key(0), X)
    # the submodule's key is derived from its path 'd' below the root
    assert variables['params']['d']['w'].shape == (4, 3)
    p = variables['params']['d']
    np.testing.assert_allclose(
        Twice().apply(variables, X), 2 * (X @ p['w'] + p['b'][None]), rtol=1e-6
    )
    assert plain['params']['w'].shape == (4, 3)

    J = nn.jit(WithEncode, methods=['encode'])
    TRACES.clear()
    np.testing.assert_allclose(J().apply({}, X), 3 * X)
    n = len(TRACES)
    assert set(TRACES) == {'encode'}
    np.testing.assert_allclose(J().apply({}, X), 3 * X)
    assert len(TRACES) == n


def test_jit_of_a_non_module_is_a_target_error():
    with pytest.raises(errors.TransformTargetError, match='Module class or a Module method'):
        nn.jit(object)


def test_jit_on_a_method_of_an_unbound_module_compiles_it_once_per_module():
    traces = []

    class Model(nn.Module):
        features: int = 2

        @nn.compact
        def __call__(self, x):
            return Dense(self.features)(x)

        @nn.jit
        def init_with_output(self, rngs, *args, **kwargs):
            traces.append(self.features)
            return super().init_with_output(rngs, *args, **kwargs)

    x = jnp.ones((2, 3))
    y, variables = Model().init_with_output(jax.random.key(0), x)
    want_y, want_vars = nn.Module.init_with_output(Model(), jax.random.key(0), x)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(
        variables['params']['Dense_0']['w'], want_vars['params']['Dense_0']['w']
    )
    Model().init_with_output(jax.random.key(1), x)  # an equal module: no new trace
    Model(features=3).init_with_output(jax.random.key(0), x)
    assert traces == [2, 3]


def test_equal_submodule_fields_built_anew_reuse_the_trace():
    traces = []

    class Scale(nn.Module):
        factor: float

        def __call__(self, x):
            return x * self.factor

    class Chain(nn.Module):
        layers: tuple

        @nn.compact
        def __call__(self, x):
            traces.append(len(self.layers))
            for layer in self.layers:
                x = layer(x)
            return x

    jitted = nn.jit(Chain)
    x = jnp.array([1.0, 2.0])
    np.testing.assert_allclose(jitted((Scale(2.0), Scale(3.0))).apply({}, x), 6 * x)
    np.testing.assert_allclose(jitted((Scale(2.0), Scale(3.0))).apply({}, x), 6 * x)
    assert traces == [2]
    np.testing.assert_allclose(jitted((Scale(2.0), Scale(5.0))).apply({}, x), 10 * x)
    assert traces == [2, 2]


class PerRow(nn.Module):
    """Draws once per row (more draws for longer inputs), from two streams."""

    @nn.compact
    def __call__(self, x):
        for i in range(x.shape[0]):
            stream = 'dropout' if i % 2 else 'noise'
            x = x.at[i].add(jax.random.uniform(self.make_rng(stream), x.shape[1:]))
        return x


class TwoPerRow(nn.Module):
    jit: bool = True

    @nn.compact
    def __call__(self, x):
        layer = nn.jit(PerRow)(name='rows') if self.jit else PerRow(name='rows')
        # The second call's draws continue from the counters the first left.
        return layer(x), layer(x), jax.random.key_data(self.make_rng('dropout'))


def test_rng_use_depending_on_the_input_shape_draws_as_without_jit():
    """Flax runs a jitted module whose rng use changes with the input shape; so does
    linen, with the unjitted module's numbers for every shape, in any order (the
    counters after a call are those of the call's own shapes, traced or cached)."""
    rngs = {'dropout': jax.random.key(1), 'noise': jax.random.key(2)}
    jitted, plain = TwoPerRow(), TwoPerRow(jit=False)
    for rows in (1, 3, 2, 3, 1, 4, 2):
        x = jnp.ones((rows, 2))
        got = jitted.apply({}, x, rngs=rngs)
        want = plain.apply({}, x, rngs=rngs)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_init_of_a_shape_dependent_jitted_layer_gives_the_unjitted_parameters():
    class Rows(nn.Module):
        jit: bool = True

        @nn.compact
        def __call__(self, x):
            make = nn.jit(nn.Dense) if self.jit else nn.Dense
            return [make(2, name=f'row_{i}')(x[i]) for i in range(x.shape[0])]

    class Outer(nn.Module):
        jit: bool = True

        @nn.compact
        def __call__(self, x):
            inner = (nn.jit(Rows) if self.jit else Rows)(self.jit, name='inner')
            return inner(x[:1]), inner(x)

    jitted = Outer()
    for rows in (3, 1, 2):
        x = jnp.ones((rows, 4))
        got = jitted.init(jax.random.key(0), x)
        want = Outer(jit=False).init(jax.random.key(0), x)
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
        # The initializer compiled into the jitted program may round a few float32
        # ulps of its O(1) intermediates apart from its op-by-op run (JAX 0.10's XLA
        # does); a wrong key would give other numbers altogether.
        eps = np.finfo(np.float32).eps
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(g, w, rtol=4 * eps, atol=4 * eps)


def test_rng_use_decided_by_python_state_is_a_transform_error():
    draws = iter(range(1, 100))

    class Fickle(nn.Module):
        @nn.compact
        def __call__(self, x):
            # Each trace draws once more than the one before it.
            for _ in range(next(draws)):
                x = x + jax.random.uniform(self.make_rng('dropout'), x.shape)
            return x

    model = nn.jit(Fickle)()
    with pytest.raises(TransformArgumentError, match='"dropout" was drawn at'):
        model.apply({}, jnp.ones(2), rngs={'dropout': jax.random.key(0)})


def test_an_error_raised_while_rng_paths_are_learnt_chains_nothing_internal():
    class Wrong(nn.Module):
        @nn.compact
        def __call__(self, x):
            return jnp.dot(x, jnp.ones((3, 3)))  # x has 2 features: a user error

    with pytest.raises(TypeError) as info:
        nn.jit(Wrong)().init(jax.random.key(0), jnp.ones(2))
    # The traceback shows the user's error alone, not linen's learning machinery.
    assert info.value.__context__ is None or 'linen' not in type(info.value.__context__).__module__
