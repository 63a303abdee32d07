"""Flax as oracle for ``nn.cond``, ``nn.switch`` and ``nn.while_loop`` lifting Modules and
Variables beyond ``mdl`` (Flax's multi-scope lifting): passed as operands, in the loop
carry, or held in ``mdl``'s fields; and for state written through a transform and read
again after it.

Each program is written once against an ``nn`` namespace and run with ``flax.linen``
and ``linen.nn`` for the same key: same variables, same outputs, same state updates,
same errors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as linen_nn

pytestmark = pytest.mark.flax
flax = pytest.importorskip('flax')
flax_nn = pytest.importorskip('flax.linen')

# Row sums of opposite sign, total > 0: `cond` on the total takes the true branch.
X = jnp.linspace(-1.0, 1.0, 6).reshape(2, 3) + 0.3


def cond_setup_module_operand(nn):
    """A setup submodule as an operand; its params are created inside the branches."""

    class Top(nn.Module):
        def setup(self):
            self.d = nn.Dense(2)

        def __call__(self, x):
            return nn.cond(
                x.sum() > 0, lambda m, d, x: d(x), lambda m, d, x: -d(x), self, self.d, x
            )

    return Top()


def cond_compact_module_operand(nn):
    """An inline (compact) submodule, not yet bound to a name, as an operand."""

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            d = nn.Dense(2)
            return nn.cond(x.sum() < 0, lambda m, d, x: d(x), lambda m, d, x: -d(x), self, d, x)

    return Top()


def cond_same_module_twice(nn):
    class Top(nn.Module):
        def setup(self):
            self.d = nn.Dense(3)

        def __call__(self, x):
            return nn.cond(
                x.sum() > 0,
                lambda m, a, b, x: a(x) + b(x),
                lambda m, a, b, x: a(x) - b(x),
                self,
                self.d,
                self.d,
                x,
            )

    return Top()


def cond_field_module(nn):
    """``mdl`` holds a sibling module as a field; branches are its unbound methods."""

    class Body(nn.Module):
        d: nn.Module

        def left(self, x):
            return self.d(x)

        def right(self, x):
            return -self.d(x)

    class Top(nn.Module):
        def setup(self):
            self.d = nn.Dense(3)
            self.b = Body(self.d)

        def __call__(self, x):
            return nn.cond(x.sum() > 0, Body.left, Body.right, self.b, x)

    return Top()


def switch_module_operands(nn):
    """Bound methods of ``mdl`` as branches, two setup submodules as operands."""

    class Top(nn.Module):
        def setup(self):
            self.a = nn.Dense(2)
            self.b = nn.Dense(2)

        def first(self, a, b, x):
            return a(x)

        def second(self, a, b, x):
            return b(x) * 2.0

        def third(self, a, b, x):
            return a(x) - b(x)

        def __call__(self, x):
            if self.is_initializing():  # every branch must see the same variables
                self.a(x)
                self.b(x)
            branches = [self.first, self.second, self.third]
            return nn.switch(jnp.argmax(x.sum(1)) + 1, branches, self, self.a, self.b, x)

    return Top()


def while_module_in_field(nn):
    class Body(nn.Module):
        d: nn.Module

        def __call__(self, x):
            return jnp.tanh(self.d(x))

    class Top(nn.Module):
        def setup(self):
            self.d = nn.Dense(3)
            self.b = Body(self.d)

        def __call__(self, x):
            if self.is_initializing():
                self.d(x)  # the loop cannot create variables: make them first
            return nn.while_loop(
                lambda m, s: s[0] < 3, lambda m, s: (s[0] + 1, m(s[1])), self.b, (0, x)
            )[1]

    return Top()


def while_bound_method_of_mdl(nn):
    class Top(nn.Module):
        def setup(self):
            self.d = nn.Dense(3)

        def keep_going(self, s):
            return s[0] < 2

        def step(self, s):
            return s[0] + 1, jnp.tanh(self.d(s[1]))

        def __call__(self, x):
            if self.is_initializing():
                self.d(x)
            return nn.while_loop(self.keep_going, self.step, self, (0, x))[1]

    return Top()


PROGRAMS = {
    f.__name__: f
    for f in (
        cond_setup_module_operand,
        cond_compact_module_operand,
        cond_same_module_twice,
        cond_field_module,
        switch_module_operands,
        while_module_in_field,
        while_bound_method_of_mdl,
    )
}


# --------------------------------------------------- programs that write state


def _counter(nn):
    class Counter(nn.Module):
        @nn.compact
        def __call__(self, x):
            n = self.variable('state', 'n', lambda: jnp.zeros(()))
            n.value = n.value + x.sum()
            return x

    return Counter


def cond_variable_operand(nn):
    """A Variable as an operand: each branch updates it."""

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            v = self.variable('state', 'v', lambda: jnp.zeros(3))

            def add(m, v, x):
                v.value = v.value + x.sum(0)
                return x * 2.0

            def sub(m, v, x):
                v.value = v.value - x.sum(0)
                return x

            return nn.cond(x.sum() > 0, add, sub, self, v, x)

    return Top()


def cond_module_state_before_and_inside(nn):
    """A setup submodule updates its state outside, then (as an operand) inside."""

    class Top(nn.Module):
        def setup(self):
            self.c = _counter(nn)()

        def __call__(self, x):
            self.c(x)
            return nn.cond(
                x.sum() > 0, lambda m, c, x: 2.0 * c(x), lambda m, c, x: c(-x), self, self.c, x
            )

    return Top()


def while_variable_field_carried(nn):
    """A Variable held in ``mdl``'s field, updated by the loop body (carried)."""

    class Body(nn.Module):
        v: nn.Variable

        def __call__(self, x):
            self.v.value = self.v.value + 1.0
            return x * 0.5

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            v = self.variable('state', 'count', lambda: jnp.zeros(()))
            return nn.while_loop(
                lambda m, s: s[0] < 3,
                lambda m, s: (s[0] + 1, m(s[1])),
                Body(v),
                (0, x),
                carry_variables='state',
            )[1]

    return Top()


def _state_around(nn, transform):
    """State written before a lifted method, inside it, and after it: none is lost."""
    Counter = _counter(nn)
    wrap = {'remat': nn.remat, 'jit': nn.jit}[transform]

    class Top(nn.Module):
        def setup(self):
            self.c = Counter()

        @wrap
        def twice(self, x):
            return self.c(2.0 * x)

        def __call__(self, x):
            self.c(x)
            self.twice(x)
            return self.c(x)

    return Top()


def remat_state_around(nn):
    return _state_around(nn, 'remat')


def jit_state_around(nn):
    return _state_around(nn, 'jit')


STATEFUL = {
    f.__name__: f
    for f in (
        cond_variable_operand,
        cond_module_state_before_and_inside,
        while_variable_field_carried,
        remat_state_around,
        jit_state_around,
    )
}


def _np(tree):
    tree = flax.core.unfreeze(tree) if hasattr(tree, 'unfreeze') else dict(tree)
    return jax.tree_util.tree_map(np.asarray, tree)


def _assert_close(a, b, rtol=1e-5, atol=1e-6):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def _run(model, mutable=False):
    variables = model.init(jax.random.key(0), X)
    if mutable:
        y, updated = model.apply(variables, X, mutable=True)
        return _np(variables), y, _np(updated)
    return _np(variables), model.apply(variables, X)


@pytest.mark.parametrize('name', list(PROGRAMS))
def test_same_variables_and_outputs_as_flax(name):
    _assert_close(_run(PROGRAMS[name](linen_nn)), _run(PROGRAMS[name](flax_nn)))


@pytest.mark.parametrize('name', list(STATEFUL))
def test_same_state_updates_as_flax(name):
    ours = _run(STATEFUL[name](linen_nn), mutable=True)
    _assert_close(ours, _run(STATEFUL[name](flax_nn), mutable=True))


def test_state_around_a_lifted_method_counts_every_update():
    # Independent of Flax: init adds x, 2x and x (sum 4 * X.sum()); apply as much again.
    total = float(X.sum())
    for make in (remat_state_around, jit_state_around):
        variables, _, updated = _run(make(linen_nn), mutable=True)
        np.testing.assert_allclose(variables['state']['c']['n'], 4 * total, rtol=1e-6)
        np.testing.assert_allclose(updated['state']['c']['n'], 8 * total, rtol=1e-6)


def test_cond_module_operand_uses_its_own_params():
    # Independent of Flax: the true branch is the operand's Dense, on its own params.
    model = cond_setup_module_operand(linen_nn)
    variables = model.init(jax.random.key(0), X)
    d = variables['params']['d']
    expected = X @ d['kernel'] + d['bias'].reshape(1, -1)
    np.testing.assert_allclose(model.apply(variables, X), expected, rtol=1e-5, atol=1e-6)


def _body_returns_module(nn):
    class Top(nn.Module):
        def setup(self):
            self.d = nn.Dense(3)

        def __call__(self, x):
            if self.is_initializing():
                self.d(x)
            # The carry holds a Module: it is lifted, and the body may not return it.
            return nn.while_loop(
                lambda m, s: s[0] < 2,
                lambda m, s: (s[0] + 1, s[1], s[1](s[2])),
                self,
                (0, self.d, x),
            )[2]

    return Top()


def _branch_returns_module(nn):
    class Top(nn.Module):
        def setup(self):
            self.d = nn.Dense(3)

        def __call__(self, x):
            return nn.cond(x.sum() > 0, lambda m, d, x: d, lambda m, d, x: d, self, self.d, x)

    return Top()


@pytest.mark.parametrize('make', [_body_returns_module, _branch_returns_module])
def test_returning_a_lifted_module_raises_as_flax(make):
    from linen.core import errors as linen_errors

    texts = []
    for nn, errs in ((flax_nn, flax.errors), (linen_nn, linen_errors)):
        with pytest.raises(errs.TransformedMethodReturnValueError) as info:
            make(nn).init(jax.random.key(0), X)
        texts.append(str(info.value))
    assert texts[1].startswith(texts[0].split(' (https://')[0])
