"""Lifted cond, switch and while_loop: branch selection, shared params, threaded state."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn


class Dense(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        w = self.param('w', lambda k, s: jax.random.normal(k, s), (x.shape[-1], self.features))
        return x @ w


class CondFoo(nn.Module):
    @nn.compact
    def __call__(self, x, pred):
        self.variable('state', 'true_count', lambda: jnp.array(0))
        self.variable('state', 'false_count', lambda: jnp.array(0))

        def true_fn(mdl, x):
            mdl.variable('state', 'true_count').value += 1
            return Dense(2, name='dense')(x)

        def false_fn(mdl, x):
            mdl.variable('state', 'false_count').value += 1
            return -Dense(2, name='dense')(x)

        return nn.cond(pred, true_fn, false_fn, self, x)


X = jax.random.normal(jax.random.key(1), (3, 4))


@pytest.mark.parametrize('pred', [True, False])
def test_cond_selects_a_branch_and_counts_it(pred):
    variables = CondFoo().init(jax.random.key(0), X, pred)
    w = variables['params']['dense']['w']
    assert w.shape == (4, 2)
    # As in Flax, branches are traced one after the other and share rng counters, so the
    # init key of 'dense' depends on which branch runs (integration_tests checks Flax's values).
    y, upd = CondFoo().apply(variables, X, jnp.asarray(pred), mutable='state')
    np.testing.assert_allclose(y, (X @ w) if pred else -(X @ w), rtol=1e-6)
    counts = (int(upd['state']['true_count']), int(upd['state']['false_count']))
    init_counts = (int(variables['state']['true_count']), int(variables['state']['false_count']))
    assert counts == (
        (init_counts[0] + 1, init_counts[1]) if pred else (init_counts[0], init_counts[1] + 1)
    )


def test_switch_runs_the_indexed_branch():
    class Foo(nn.Module):
        @nn.compact
        def __call__(self, x, index):
            for c in 'abc':
                self.variable('state', f'{c}_count', lambda: jnp.array(0))

            def branch(c, inc, sign):
                def fn(mdl, x):
                    mdl.variable('state', f'{c}_count').value += inc
                    return sign * Dense(2, name='dense')(x)

                return fn

            branches = [branch('a', 1, 1.0), branch('b', 2, -1.0), branch('c', 3, 0.5)]
            return nn.switch(index, branches, self, x)

    variables = Foo().init(jax.random.key(0), X, 0)
    w = variables['params']['dense']['w']
    start = {k: int(v) for k, v in variables['state'].items()}
    for index, sign, name, inc in [(0, 1.0, 'a', 1), (1, -1.0, 'b', 2), (2, 0.5, 'c', 3)]:
        y, upd = Foo().apply(variables, X, jnp.asarray(index), mutable='state')
        np.testing.assert_allclose(y, sign * (X @ w), rtol=1e-6)
        expected = dict(start)
        expected[f'{name}_count'] += inc
        assert {k: int(v) for k, v in upd['state'].items()} == expected


class WhileLoopExample(nn.Module):
    @nn.compact
    def __call__(self, x):
        def cond_fn(mdl, c):
            return mdl.variables['state']['acc'] < 10

        def body_fn(mdl, c):
            acc = mdl.variable('state', 'acc', lambda: jnp.array(0))
            acc.value += 1
            return Dense(c.shape[-1])(c)

        if self.is_mutable_collection('params'):
            return body_fn(self, x)
        return nn.while_loop(cond_fn, body_fn, self, x, carry_variables='state')


def test_while_loop_threads_carry_variables_until_the_condition_fails():
    x = jnp.ones((2, 2)) * 0.3
    variables = WhileLoopExample().init(jax.random.key(0), x)
    assert int(variables['state']['acc']) == 1
    w = variables['params']['Dense_0']['w']
    y, state = WhileLoopExample().apply(variables, x, mutable=['state'])
    assert int(state['state']['acc']) == 10
    expected = x
    for _ in range(9):
        expected = expected @ w
    np.testing.assert_allclose(y, expected, rtol=1e-5)


def test_while_loop_split_rngs_gives_each_iteration_a_fresh_key():
    class Draw(nn.Module):
        split: bool

        @nn.compact
        def __call__(self, c):
            def cond_fn(mdl, c):
                return c[0] < 3

            def body_fn(mdl, c):
                i, acc = c
                r = jax.random.uniform(mdl.make_rng('noise'), ())
                return i + 1, acc.at[i].set(r)

            return nn.while_loop(cond_fn, body_fn, self, c, split_rngs={'noise': self.split})

    c = (jnp.array(0), jnp.zeros(3))
    rngs = {'noise': jax.random.key(5)}
    _, draws = Draw(split=True).apply({}, c, rngs=rngs)
    assert len({float(d) for d in draws}) == 3
    _, draws = Draw(split=False).apply({}, c, rngs=rngs)
    assert len({float(d) for d in draws}) == 1
