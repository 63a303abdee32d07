"""JAX's initializers are staged once per shape in a traced init, with the same program.

The reference is the same init with staging switched off (every initializer called
directly): equations, their parameters and their profiling labels must be the same,
so the compiled program and the numbers are too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.core._staged_init as staged_init
from linen.core import init

INITS = {
    'lecun_normal': jax.nn.initializers.lecun_normal(),
    'normal': jax.nn.initializers.normal(0.02),
    'truncated_normal': jax.nn.initializers.truncated_normal(0.5),
    'orthogonal': jax.nn.initializers.orthogonal(),
    'constant': jax.nn.initializers.constant(2.5),
    'zeros': jax.nn.initializers.zeros,
    'fan_out_uniform': jax.nn.initializers.variance_scaling(2.0, 'fan_out', 'uniform'),
}


def _model(scope, x):
    with jax.named_scope('layer'):
        y = x
        for i, name in enumerate(sorted(INITS)):
            child = scope.push(f'{name}_{i}')
            w = child.param('w', INITS[name], (4, 4), jnp.float32)
            y = y @ w
        bf16 = scope.param('bf16', INITS['lecun_normal'], (4, 4), jnp.bfloat16)
        return y @ bf16.astype(jnp.float32)


def _equations(jaxpr):
    return [
        (
            str(e.primitive),
            tuple(str(v.aval) for v in e.invars),
            tuple(sorted((k, str(v)) for k, v in e.params.items())),
            str(e.source_info.name_stack),
        )
        for e in jaxpr.eqns
    ]


def _traced_init(x):
    fn = lambda key, x: init(_model)(key, x)  # (a fresh function per trace)
    return fn, _equations(jax.make_jaxpr(fn)(jax.random.key(3), x).jaxpr)


def test_a_traced_init_has_the_program_and_numbers_of_direct_initializer_calls(monkeypatch):
    x = jnp.ones((2, 4))
    fn, staged = _traced_init(x)
    staged_out = jax.jit(fn)(jax.random.key(3), x)
    monkeypatch.setattr(staged_init, '_PURE_MODULES', frozenset())
    monkeypatch.setattr(staged_init, '_STAGED', {})
    fn, direct = _traced_init(x)
    assert staged == direct
    direct_out = jax.jit(fn)(jax.random.key(3), x)
    for a, b in zip(jax.tree_util.tree_leaves(staged_out), jax.tree_util.tree_leaves(direct_out)):
        np.testing.assert_array_equal(a, b)


def test_jax_initializers_are_staged_and_traced_once_per_shape(monkeypatch):
    traced = []
    real = jax.jit

    def counting_jit(fn, **kwargs):
        def body(*args):
            traced.append(args[1:])
            return fn(*args)

        return real(body, **kwargs)

    monkeypatch.setattr(staged_init, '_STAGED', {})
    monkeypatch.setattr(staged_init.jax, 'jit', counting_jit)
    x = jnp.ones((2, 4))
    jax.make_jaxpr(lambda key: init(_model)(key, x))(jax.random.key(0))
    jax.make_jaxpr(lambda key: init(_model)(key, x))(jax.random.key(1))
    # One trace per initializer and (shape, dtype): lecun_normal at float32 and bfloat16.
    seen = sorted((shape, jnp.dtype(dtype).name) for shape, dtype in traced)
    assert seen == sorted([((4, 4), 'float32')] * len(INITS) + [((4, 4), 'bfloat16')])


@pytest.mark.parametrize('kind', ['python function', 'keyword argument'])
def test_other_initializers_run_directly_on_every_call(kind):
    calls = []

    def user_init(key, shape, dtype=jnp.float32, scale=1.0):
        calls.append(shape)
        return scale * jax.random.normal(key, shape, dtype)

    def model(scope, x):
        for i in range(3):
            child = scope.push(f'layer_{i}')
            if kind == 'python function':
                w = child.param('w', user_init, (4, 4))
            else:
                w = child.param('w', user_init, (4, 4), scale=2.0)
            x = x @ w
        return x

    jax.make_jaxpr(lambda key: init(model)(key, jnp.ones((1, 4))))(jax.random.key(0))
    assert calls == [(4, 4)] * 3


def test_an_unhashable_argument_runs_the_initializer_directly():
    # JAX's initializers take a list shape; a static argument cannot be one.
    def model(scope):
        return scope.param('w', jax.nn.initializers.lecun_normal(), [4, 3], jnp.float32)

    traced = jax.make_jaxpr(lambda key: init(model)(key))(jax.random.key(0))
    hashable = jax.make_jaxpr(
        lambda key: init(lambda s: s.param('w', jax.nn.initializers.lecun_normal(), (4, 3)))(key)
    )(jax.random.key(0))
    # The list goes to the initializer as it is, which JAX turns into the same program.
    assert _equations(traced.jaxpr) == _equations(hashable.jaxpr)
    assert traced.out_avals[0].shape == (4, 3)
