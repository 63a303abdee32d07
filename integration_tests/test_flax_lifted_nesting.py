"""Flax as oracle for lifted transforms nested in one another and for what they accept
as a target: ``nn.jit`` inside ``nn.jit`` drawing random numbers, Modules reached
through the fields of a Module passed to a transformed class, and a partially
applied Module constructor.

Each program is written once against an ``nn`` namespace and run with ``flax.linen``
and ``linen.nn`` for the same key. Flax's ``nn.jit`` changes the random numbers a key
gives (its documented gotcha; linen's ``nn.jit`` does not), so jitted programs are
compared with Flax's un-jitted program where random numbers are drawn, and with
Flax's jitted one on Flax's variables where they are not.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn
from integration_tests.oracle import assert_same_bits

pytestmark = pytest.mark.flax
flax = pytest.importorskip('flax')
flax_nn = pytest.importorskip('flax.linen')

X = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
RNGS = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}


def _np(tree):
    tree = flax.core.unfreeze(tree) if hasattr(tree, 'unfreeze') else tree
    return jax.tree_util.tree_map(np.asarray, tree)


# ------------------------------------------------------------- nn.jit inside nn.jit


def nested_jit(nn, jit: bool, deterministic: bool = False):
    """Two jitted dropout blocks inside a jitted parent (decorator and class forms)."""

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            y = nn.Dropout(0.5, deterministic=deterministic)(nn.Dense(4)(x))
            if deterministic:
                return y
            return y + jax.random.uniform(self.make_rng('noise'), y.shape)

    inner = nn.jit(Block) if jit else Block

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            return inner(name='a')(x) + inner(name='b')(x)

    return (nn.jit(Outer) if jit else Outer)()


def nested_jit_decorated(nn, jit: bool):
    maybe_jit = nn.jit if jit else (lambda f: f)

    class Block(nn.Module):
        @maybe_jit
        @nn.compact
        def __call__(self, x):
            return nn.Dropout(0.5, deterministic=False)(nn.Dense(4)(x))

    class Outer(nn.Module):
        @maybe_jit
        @nn.compact
        def __call__(self, x):
            return Block(name='a')(x) * Block(name='b')(x)

    return Outer()


def _run_random(model, variables=None):
    rngs = {**RNGS, 'noise': jax.random.key(3)}
    if variables is None:
        variables = model.init(rngs, X)
    y = model.apply(variables, X, rngs={'dropout': jax.random.key(2), 'noise': jax.random.key(4)})
    return _np(variables), np.asarray(y)


@pytest.mark.parametrize('make', [nested_jit, nested_jit_decorated])
def test_nested_jit_draws_the_random_numbers_of_flax_without_jit(make):
    # linen's nn.jit keeps the path-based rng derivation: nesting it changes nothing.
    ours = _run_random(make(linen_nn, jit=True))
    theirs = _run_random(make(flax_nn, jit=False))
    assert_same_bits(ours, theirs)


def test_nested_jit_matches_flax_jit_where_no_random_numbers_are_drawn():
    flax_model = nested_jit(flax_nn, jit=True, deterministic=True)
    variables = flax_model.init({**RNGS, 'noise': jax.random.key(3)}, X)
    ours = _run_random(nested_jit(linen_nn, jit=True, deterministic=True), variables)
    theirs = _run_random(flax_model, variables)
    assert_same_bits(ours, theirs)


def test_nested_jit_gradients_match_flax_without_jit():
    def grads(nn, jit):
        model = nested_jit(nn, jit)
        rngs = {**RNGS, 'noise': jax.random.key(3)}
        variables = model.init(rngs, X)

        def loss(params):
            y = model.apply(
                {'params': params}, X, rngs={'dropout': jax.random.key(2), 'noise': rngs['noise']}
            )
            return jnp.sum(y**2)

        return _np(jax.grad(loss)(variables['params']))

    assert_same_bits(grads(linen_nn, True), grads(flax_nn, False))


def test_nested_jit_twice_reuses_its_traces():
    model = nested_jit(linen_nn, jit=True)
    variables = model.init({**RNGS, 'noise': jax.random.key(3)}, X)
    first = _run_random(model, variables)
    second = _run_random(model, variables)
    assert_same_bits(first, second)


# ---------------------------------------------- Modules reached through Module fields


def nested_module_fields(nn):
    """``C(B(A()))`` with ``C.__call__`` vmapped: A's parameters are lifted through B."""

    class A(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(3)(x)

    class B(nn.Module):
        inner: nn.Module

        @nn.compact
        def __call__(self, x):
            return self.inner(x) * 2.0

    class C(nn.Module):
        outer: nn.Module

        @functools.partial(nn.vmap, variable_axes={'params': 0}, split_rngs={'params': True})
        @nn.compact
        def __call__(self, x):
            return self.outer(x)

    class D(nn.Module):
        @nn.compact
        def __call__(self, x):
            return C(B(A()))(x)

    return D()


def nested_module_fields_jit(nn):
    """The same chain through nn.jit: A's state is written back through B."""

    class A(nn.Module):
        @nn.compact
        def __call__(self, x):
            count = self.variable('counts', 'n', lambda: jnp.zeros((), jnp.int32))
            count.value += 1
            return nn.Dense(3)(x)

    class B(nn.Module):
        inner: nn.Module

        @nn.compact
        def __call__(self, x):
            return self.inner(x) + 1.0

    class C(nn.Module):
        outer: nn.Module

        @nn.compact
        def __call__(self, x):
            return self.outer(x)

    class D(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.jit(C)(B(A()))(x)

    return D()


def test_modules_in_fields_of_module_fields_are_lifted_by_vmap_as_flax():
    def run(nn):
        model = nested_module_fields(nn)
        variables = model.init(jax.random.key(0), X)
        return _np(variables), np.asarray(model.apply(variables, X))

    ours, theirs = run(linen_nn), run(flax_nn)
    assert ours[0]['params']['A_0']['Dense_0']['kernel'].shape == (3, 4, 3)
    assert_same_bits(ours, theirs)


def test_modules_in_fields_of_module_fields_write_back_through_jit_as_flax():
    def run(nn):
        model = nested_module_fields_jit(nn)
        # Flax's jit changes the initial values: both run on Flax's variables.
        variables = nested_module_fields_jit(flax_nn).init(jax.random.key(0), X)
        y, state = model.apply(variables, X, mutable=['counts'])
        return _np(variables)['counts'], np.asarray(y), _np(state)

    ours, theirs = run(linen_nn), run(flax_nn)
    assert int(ours[2]['counts']['A_0']['n']) == 2
    assert_same_bits(ours, theirs)


# ------------------------------------------------- a partially applied constructor


def _partial_programs(nn):
    ctor = functools.partial(nn.Dense, 3, use_bias=False)
    lifted = {
        'vmap': nn.vmap(ctor, variable_axes={'params': 0}, split_rngs={'params': True}),
        'remat': nn.remat(ctor),
        'map_variables': nn.map_variables(ctor, 'params', lambda t: t, init=True),
    }

    def program(kind):
        class Top(nn.Module):
            @nn.compact
            def __call__(self, x):
                return lifted[kind]()(x) + lifted[kind](name='named')(x)

        return Top()

    return lifted, program


@pytest.mark.parametrize('kind', ['vmap', 'remat', 'map_variables'])
def test_partially_applied_module_class_is_transformed_as_flax(kind):
    def run(nn):
        lifted, program = _partial_programs(nn)
        model = program(kind)
        variables = model.init(jax.random.key(0), X)
        return lifted[kind].func.__name__, _np(variables), np.asarray(model.apply(variables, X))

    ours, theirs = run(linen_nn), run(flax_nn)
    assert ours[0] == theirs[0]
    assert_same_bits(ours[1:], theirs[1:])


def test_partially_applied_module_class_under_jit_keeps_its_arguments():
    ctor = functools.partial(linen_nn.Dense, 3, use_bias=False)
    jitted = linen_nn.jit(ctor)
    assert isinstance(jitted, functools.partial)
    assert jitted.func.__name__ == 'JitDense' and jitted.args == (3,)
    variables = jitted().init(jax.random.key(0), X)
    assert set(variables['params']) == {'kernel'}
    np.testing.assert_array_equal(jitted().apply(variables, X), X @ variables['params']['kernel'])


# ------------------------------------------- several methods of one transformed class


def methods_calling_methods(nn, transform, nowrap):
    """``methods=[...]`` where the transformed ``__call__`` calls the transformed helper."""

    class Foo(nn.Module):
        def setup(self):
            self.dense = nn.Dense(2)

        def helper(self, x):
            return x * 2.0 + 1.0

        if nowrap:
            helper = nn.nowrap(helper)

        def __call__(self, x):
            return self.dense(self.helper(x))

    methods = ['__call__', 'helper']
    if transform == 'vmap':
        return nn.vmap(
            Foo, variable_axes={'params': 0}, split_rngs={'params': True}, methods=methods
        )()
    return nn.remat(Foo, methods=methods)()


@pytest.mark.parametrize('nowrap', [False, True])
@pytest.mark.parametrize('transform', ['vmap', 'remat'])
def test_transformed_method_calling_another_transformed_method_as_flax(transform, nowrap):
    # Inside the transform the module is an instance of the class it was made from (as in
    # Flax), so `self.helper(x)` is not transformed a second time.
    def run(nn):
        model = methods_calling_methods(nn, transform, nowrap)
        variables = model.init(jax.random.key(0), X)
        y = model.apply(variables, X)
        h = model.apply(variables, X, method='helper')
        return _np(variables), np.asarray(y), np.asarray(h)

    ours, theirs = run(linen_nn), run(flax_nn)
    assert_same_bits(ours, theirs)
    np.testing.assert_array_equal(ours[2], X * 2.0 + 1.0)
