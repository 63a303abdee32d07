"""Which outputs of a jaxpr depend on its unknown inputs, through JAX's loops and calls.

``lazy_init`` keeps a variable when it does not depend on an abstract input; these
check that dependency analysis against what each program plainly computes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from linen.core._lazy_init import _unknown_outputs


def flags(fn, *args, unknown):
    closed = jax.make_jaxpr(fn)(*args)
    return _unknown_outputs(closed.jaxpr, list(unknown))


def test_jit_output_that_ignores_the_unknown_input_is_known():
    @jax.jit
    def f(key, x):
        return jax.random.normal(key, (2,)), x * 2

    assert flags(f, jax.random.key(0), 1.0, unknown=[False, True]) == [False, True]


def test_remat_output_that_ignores_the_unknown_input_is_known():
    f = jax.checkpoint(lambda k, x: (k + 1.0, jnp.sin(x)))
    assert flags(f, 1.0, 2.0, unknown=[False, True]) == [False, True]


def test_scan_carry_reached_from_the_unknown_input_becomes_unknown():
    def f(a, b, xs):
        # the first carry swaps with the second on every step: both end up unknown
        def body(c, x):
            return (c[1], c[0] + x), c[0]

        return jax.lax.scan(body, (a, b), xs)

    xs = jnp.ones(3)
    assert flags(f, 1.0, 2.0, xs, unknown=[True, False, False]) == [True, True, True]


def test_scan_stacked_output_of_known_values_stays_known():
    def f(key, xs):
        def body(k, x):
            k, sub = jax.random.split(k)
            return k, (jax.random.normal(sub, ()), x * 2)

        return jax.lax.scan(body, key, xs)

    assert flags(f, jax.random.key(0), jnp.ones(3), unknown=[False, True]) == [
        False,
        False,
        True,
    ]


@pytest.mark.parametrize('unknown_bound', [True, False])
def test_while_trip_count_from_an_unknown_input_makes_every_carry_unknown(unknown_bound):
    def f(n, y):
        return jax.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2), (0, y))

    assert flags(f, 3, 1.0, unknown=[unknown_bound, False]) == [unknown_bound, unknown_bound]


def test_cond_with_an_unknown_predicate_is_unknown_and_with_a_known_one_per_branch():
    def f(p, a, b):
        return jax.lax.cond(p, lambda a, b: (a + 1, b * 3), lambda a, b: (a * 2, b * 4), a, b)

    assert flags(f, True, 1.0, 2.0, unknown=[True, False, False]) == [True, True]
    assert flags(f, True, 1.0, 2.0, unknown=[False, False, True]) == [False, True]
