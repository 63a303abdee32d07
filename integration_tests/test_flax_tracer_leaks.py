"""Flax as oracle under ``jax.checking_leaks()``: no trace outlives its call.

A user debugging a leak runs with ``JAX_CHECK_TRACER_LEAKS=1`` (``jax.checking_leaks``):
JAX then raises when anything still references a tracer after its trace ends. A
leak is also a memory leak: the tracer keeps its whole trace alive. Flax keeps no
process-wide state per call, so these programs run under the check; linen's caches
(a parameter's shape, an initializer's staged form, a layer's plan, a lifted
``jit``'s static argument) must not keep a trace alive either, which they did when
a key reached a Module (a bound-method initializer), a closure over a traced value
(``constant(mean)``), or a lifted ``jit``'s module and scope. Each model is
initialised, applied in training mode and differentiated, eagerly and under
``jax.jit``, under the check on both libraries: Flax runs, and linen gives the same
bits (under ``nn.jit``, the bits of Flax's model without it: linen's ``nn.jit`` keeps
the parameters a key gives, see docs/differences.md); with trace reuse on as well.
"""

from __future__ import annotations

import contextlib
import functools
import gc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]

import flax.linen as flax_nn  # noqa: E402

import linen.nn as linen_nn  # noqa: E402
from integration_tests.oracle import assert_same_bits  # noqa: E402
from linen.transforms import linen_reuse_traces  # noqa: E402


def _models(nn):
    class Scaled(nn.Module):
        """Initializers a cache could hold: a bound method, a closure over a tracer."""

        features: int = 4

        def fan_init(self, key, shape, dtype=jnp.float32):
            return jax.random.normal(key, shape, dtype) / self.features

        @nn.compact
        def __call__(self, x):
            w = self.param('w', self.fan_init, (1, x.shape[-1]))
            # A traced value (under jit and grad) closed over by JAX's own initializer.
            offset = self.param('offset', nn.initializers.constant(jnp.mean(x)), (1, 1))
            y = nn.DenseGeneral(self.features, kernel_init=self.fan_init)(x * w + offset)
            return nn.Dense(self.features, kernel_init=self.fan_init)(y)

    class Block(nn.Module):
        train: bool

        @nn.compact
        def __call__(self, x):
            y = nn.Dropout(0.25, deterministic=not self.train)(nn.relu(nn.Dense(4)(x)))
            return x + nn.Dense(4)(y)

    class Model(nn.Module):
        jitted: bool

        @nn.compact
        def __call__(self, x, train: bool = True):
            x = Scaled()(x)
            block = nn.jit(Block) if self.jitted else Block
            for i in range(3):  # repeated: reuse traces one, nn.jit compiles one
                x = block(train, name=f'block_{i}')(x)
            return x

    return Model


X = np.linspace(-1, 1, 3 * 4, dtype=np.float32).reshape(3, 4)


@contextlib.contextmanager
def _checking_leaks():
    """``jax.checking_leaks()`` with the objects made before it frozen out of the
    garbage collector (``gc.freeze``). JAX's check collects garbage at the end of every
    trace, which in a test process holding a suite's objects took most of a minute
    per test; a tracer is made inside, so the check still sees it, and a frozen
    object referencing it still keeps it alive (a leak into an older cache is
    caught: test_a_leak_into_an_older_object_is_still_caught)."""
    gc.freeze()
    try:
        with jax.checking_leaks():
            yield
    finally:
        gc.unfreeze()


def _run(nn, jit: bool, jitted: bool = False):
    model = _models(nn)(jitted)
    key = jax.random.key(0)
    dropout = jax.random.key(1)

    def init(key, x):
        return model.init(key, x)

    def apply(variables, key, x):
        return model.apply(variables, x, rngs={'dropout': key})

    def loss(params, key, x):
        return jnp.sum(jnp.sin(apply({'params': params}, key, x)))

    grad = jax.grad(loss, argnums=(0, 2))
    if jit:  # fresh functions: JAX's own trace cache never answers
        init, apply, grad = jax.jit(init), jax.jit(apply), jax.jit(grad)
    with _checking_leaks():
        variables = init(key, X)
        out = apply(variables, dropout, X)
        grads = grad(variables['params'], dropout, X)
    return jax.tree_util.tree_map(np.asarray, (dict(variables), out, grads))


@functools.cache
def _flax_run(jit: bool):
    """Flax's run of the plain model: the oracle of three tests per mode, run once."""
    return _run(flax_nn, jit)


@pytest.mark.parametrize('reuse', [False, True], ids=['reuse-off', 'reuse-on'])
@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
def test_no_trace_outlives_its_call(jit, reuse):
    # Flax's run raises if Flax leaked (then the program would prove nothing).
    theirs = _flax_run(jit)
    with linen_reuse_traces(reuse):
        assert_same_bits(_run(linen_nn, jit), theirs)


@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
def test_no_trace_outlives_a_lifted_jit(jit):
    # Flax runs the blocks under nn.jit without a leak, with other numbers (its nn.jit
    # changes the rng streams); linen's nn.jit gives the numbers of the plain model.
    _run(flax_nn, jit, jitted=True)
    ours, theirs = _run(linen_nn, jit, jitted=True), _flax_run(jit)
    if jit:
        assert_same_bits(ours, theirs)
        return
    # Eagerly, a compiled block may round differently from Flax's op-by-op one.
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _lazy_variables(nn):
    class Recurrent(nn.Module):
        @nn.compact
        def __call__(self, x):
            # Variables made inside lifted transforms (remat, the RNN's scan): linen's
            # eager lazy_init sees them come out as tracers and stages the call.
            y = nn.remat(nn.Dense)(3)(x)
            return nn.RNN(nn.GRUCell(3))(y)

    with _checking_leaks():
        variables = Recurrent().lazy_init(
            jax.random.key(0), jax.ShapeDtypeStruct((2, 4, 3), jnp.float32)
        )
    return jax.tree_util.tree_map(np.asarray, dict(variables))


def test_lazy_init_keeps_no_tracer():
    assert_same_bits(_lazy_variables(linen_nn), _lazy_variables(flax_nn))


def _wrapped_run(nn, jit: bool):
    """Methods made per call: the wrapped layers' lifted ``forward`` closures, a
    function given to ``nn.map_variables``, a ``method=`` lambda; each closes over
    traced values under ``jax.jit``."""

    class Wrapped(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool = True):
            x = nn.SpectralNorm(nn.Dense(4))(x, update_stats=train)
            x = nn.WeightNorm(nn.Dense(4))(x)
            shift = jnp.mean(x)

            def forward(dense, y):
                return dense(y) + shift

            mapped = nn.map_variables(forward, 'params', lambda v: v, init=self.is_initializing())
            return mapped(nn.Dense(4), x)

    model = Wrapped()

    def init(key, x):
        return model.init(key, x)

    def apply(variables, x):
        scale = jnp.max(x)
        return model.apply(variables, x, method=lambda m, x: m(x) * scale, mutable=['batch_stats'])

    if jit:
        init, apply = jax.jit(init), jax.jit(apply)
    with _checking_leaks():
        variables = init(jax.random.key(0), X)
        out = apply(variables, X)
        shapes = jax.eval_shape(apply, variables, X)
    shapes = jax.tree_util.tree_map(lambda s: (s.shape, str(s.dtype)), shapes)
    return jax.tree_util.tree_map(np.asarray, (dict(variables), out)), shapes


@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
def test_methods_made_per_call_keep_no_tracer(jit):
    # linen's profiling labels were cached by the method object: every per-call closure
    # stayed in the cache with what it closed over (under jit, tracers: JAX's check
    # raised, after minutes spent describing the leak).
    ours, our_shapes = _wrapped_run(linen_nn, jit)
    theirs, their_shapes = _wrapped_run(flax_nn, jit)
    assert our_shapes == their_shapes
    assert_same_bits(ours, theirs)


def test_a_leak_into_an_older_object_is_still_caught():
    """The frozen heap hides no leak: a tracer kept by a cache made before the check."""
    cache: list = []
    with pytest.raises(Exception, match='Leaked'):  # JAX raises a bare Exception
        with _checking_leaks():
            jax.jit(lambda x: (cache.append(x), x)[1])(jnp.ones(3))
    assert len(cache) == 1
