"""Flax as oracle under JAX's strict and non-default settings.

A user runs a Flax program with a JAX setting switched (strict dtype promotion,
``debug_nans``, a transfer guard, ``disable_jit``, a matmul precision, 64-bit
mode, JAX's internal checks, its key-reuse checker, the other threefry layout,
another PRNG implementation) and swaps in linen: the program must do what it did on Flax. For each setting a small
model with the common layers (Dense, BatchNorm, LayerNorm, Dropout, ``nn.remat``;
attention with a causal mask) is initialised, applied in training mode and
differentiated, eagerly and under ``jax.jit``, on both libraries: the variables,
outputs and gradients are the same bits, or both raise the same class of error.

The PRNG implementation is also switched in one process, as a test suite
parametrised over implementations does: a raw ``jax.random.PRNGKey`` is uint32[4]
under both ``rbg`` and ``unsafe_rbg``, read with the default implementation of the
moment, so nothing cached by its shape alone may serve the other implementation.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('flax')
pytestmark = [pytest.mark.flax, pytest.mark.usefixtures('shared_compilations')]

import flax.linen as flax_nn  # noqa: E402

import linen.nn as linen_nn  # noqa: E402
from integration_tests.oracle import assert_same_bits, jax_settings  # noqa: E402


def _models(nn):
    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            y = nn.Dense(16)(nn.LayerNorm()(x))
            y = nn.Dropout(0.2, deterministic=not train)(nn.gelu(y))
            return x + nn.Dense(8)(y)

    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool = True):
            x = nn.relu(nn.BatchNorm(use_running_average=not train)(nn.Dense(8)(x)))
            x = Block()(x, train)
            x = nn.remat(Block, static_argnums=(2,))()(x, train)
            return nn.Dense(3)(x)

    class Attention(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool = True):
            mask = nn.make_causal_mask(jnp.ones(x.shape[:2]))
            attention = nn.MultiHeadDotProductAttention(
                num_heads=2, qkv_features=8, dropout_rate=0.1, deterministic=not train
            )
            return nn.RMSNorm()(attention(x, mask=mask))

    return {'mlp': Mlp(), 'attention': Attention()}


INPUTS = {
    'mlp': np.linspace(-1, 1, 4 * 5, dtype=np.float32).reshape(4, 5),
    'attention': np.linspace(-1, 1, 2 * 5 * 8, dtype=np.float32).reshape(2, 5, 8),
}


def _run(nn, model: str, keys, x, jit: bool):
    """Variables, output and mutated state of training mode, and parameter gradients."""
    module = _models(nn)[model]

    def init(key, dropout_key, x):
        return module.init({'params': key, 'dropout': dropout_key}, x)

    def apply(variables, dropout_key, x):
        return module.apply(variables, x, rngs={'dropout': dropout_key}, mutable=['batch_stats'])

    def loss(params, rest, dropout_key, x):
        y, _ = apply({'params': params, **rest}, dropout_key, x)
        return jnp.sum(y * y)

    grad = jax.grad(loss)
    if jit:
        init, apply, grad = jax.jit(init), jax.jit(apply), jax.jit(grad)
    key, dropout_key = keys
    variables = init(key, dropout_key, x)
    out = apply(variables, dropout_key, x)
    rest = {c: v for c, v in variables.items() if c != 'params'}
    grads = grad(variables['params'], rest, dropout_key, x)
    return jax.tree_util.tree_map(np.asarray, (dict(variables), out, grads))


def _outcome(nn, model, setting, jit, raw_key=False):
    """``('ok', arrays)`` or ``('error', exception class)`` of the program under ``setting``."""
    with SETTINGS[setting]():
        try:
            key = jax.random.PRNGKey(0) if raw_key else jax.random.key(0)
            keys = (key, jax.random.fold_in(key, 1))
        except Exception:  # a transfer guard refuses the seed: make the keys outside it
            keys = None
    if keys is None:
        key = jax.random.PRNGKey(0) if raw_key else jax.random.key(0)
        keys = (key, jax.random.fold_in(key, 1))
    keys = jax.device_put(keys)
    x = jax.device_put(INPUTS[model])
    with SETTINGS[setting]():
        try:
            return 'ok', _run(nn, model, keys, x, jit)
        except Exception as error:
            return 'error', type(error)


SETTINGS = {
    'strict dtype promotion': lambda: jax.numpy_dtype_promotion('strict'),
    'debug_nans': lambda: jax.debug_nans(True),
    'debug_infs': lambda: jax.debug_infs(True),
    'transfer guard disallow': lambda: jax.transfer_guard('disallow'),
    'disable_jit': jax.disable_jit,
    'matmul precision highest': lambda: jax.default_matmul_precision('highest'),
    'matmul precision bfloat16': lambda: jax.default_matmul_precision('bfloat16'),
    'x64': lambda: jax_settings({'jax_enable_x64': True}),
    'enable_checks': lambda: jax_settings({'jax_enable_checks': True}),
    'key reuse checks': lambda: jax_settings({'jax_debug_key_reuse': True}),
    'threefry partitionable flipped': lambda: jax_settings(
        {'jax_threefry_partitionable': not jax.config.jax_threefry_partitionable}
    ),
    'rbg default': lambda: jax.default_prng_impl('rbg'),
    'unsafe_rbg default': lambda: jax.default_prng_impl('unsafe_rbg'),
}


@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
@pytest.mark.parametrize('model', list(INPUTS))
@pytest.mark.parametrize('setting', list(SETTINGS))
def test_a_setting_gives_flaxs_outcome(setting, model, jit):
    raw_key = setting.endswith('rbg default')
    theirs = _outcome(flax_nn, model, setting, jit, raw_key)
    ours = _outcome(linen_nn, model, setting, jit, raw_key)
    if theirs[0] == 'error':
        # Where Flax fails, linen fails the same way (or runs).
        assert ours[0] == 'ok' or issubclass(ours[1], theirs[1]), (ours, theirs)
        return
    assert ours[0] == 'ok', ours
    assert_same_bits(ours[1], theirs[1])


def _mlp_state(nn, jit: bool):
    """Parameters and a dropout output of the MLP from a raw ``PRNGKey(0)``."""
    module = _models(nn)['mlp']
    x = INPUTS['mlp']
    key = jax.random.PRNGKey(0)

    def init(key):
        return module.init(key, x)

    def apply(variables, key):
        return module.apply(variables, x, rngs={'dropout': key}, mutable=['batch_stats'])[0]

    if jit:  # fresh functions: JAX's own trace cache never answers
        init, apply = jax.jit(init), jax.jit(apply)
    variables = init(key)
    return jax.tree_util.tree_map(np.asarray, (dict(variables), apply(variables, key)))


@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
def test_switching_the_prng_implementation_in_one_process(jit):
    # rbg and unsafe_rbg alternate: each one's raw keys after the other's
    for impl in ('rbg', 'unsafe_rbg', 'rbg', 'threefry2x32', 'unsafe_rbg'):
        with jax.default_prng_impl(impl):
            assert_same_bits(_mlp_state(linen_nn, jit), _mlp_state(flax_nn, jit))


FRESH_TRANSFER_GUARD = """
import sys
import jax, numpy as np
import flax.linen as flax_nn, linen.nn as linen_nn

def run(nn):
    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(3)(nn.relu(nn.LayerNorm()(nn.Dense(8)(x))))

    x = jax.device_put(np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5))
    key = jax.device_put(jax.random.key(0))
    with jax.transfer_guard('disallow'):
        variables = jax.jit(Mlp().init)(key, x)
        return variables, jax.jit(Mlp().apply)(variables, x)

# Linen first: nothing Flax did may have warmed a cache it reads.
ours = run(linen_nn)
theirs = run(flax_nn)
same = jax.tree_util.tree_all(jax.tree_util.tree_map(
    lambda a, b: a.dtype == b.dtype and np.asarray(a).tobytes() == np.asarray(b).tobytes(),
    ours, theirs))
print('same' if same else 'different')
"""


def test_transfer_guard_in_a_fresh_process_as_flax(tools):
    # In a process where nothing ran yet, a jitted init and apply under
    # transfer_guard('disallow') run on Flax; linen's parameter shape check made its
    # abstract key from a concrete seed, a host-to-device transfer the guard refused
    # (the test above passes in a warm process, where that key was made already).
    result = tools.run_checked([sys.executable, '-c', FRESH_TRANSFER_GUARD])
    assert result.stdout.strip().splitlines()[-1] == 'same'


def _split_rng_models(nn):
    class Cell(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            h = nn.Dropout(0.5, deterministic=False)(nn.Dense(3)(c + x))
            return h, h

    class Scanned(nn.Module):
        @nn.compact
        def __call__(self, x):
            scan = nn.scan(
                Cell,
                variable_axes={'params': 0},
                split_rngs={'params': True, 'dropout': True},
                in_axes=0,
            )()
            # The same lifted instance twice: each call splits the scope's keys.
            _, ys = scan(jnp.zeros(x.shape[1:], x.dtype), x)
            _, ys = scan(jnp.zeros(x.shape[1:], x.dtype), ys)
            return ys

    class Vmapped(nn.Module):
        @nn.compact
        def __call__(self, x):
            dense = nn.vmap(
                nn.Dense,
                variable_axes={'params': 0},
                split_rngs={'params': True},
                in_axes=0,
            )(3)
            return dense(dense(x))

    return {'scan': Scanned(), 'vmap': Vmapped()}


def _key_reuse_run(nn, model: str, stage: str, jit: bool):
    """The stage's arrays under JAX's key reuse checker, and whether it left the
    user's keys consumed (a later split of them refused)."""
    module = _split_rng_models(nn)[model]
    x = jnp.asarray(INPUTS['mlp'][:2, :3])
    keys = {'params': jax.random.key(0), 'dropout': jax.random.key(1)}
    if stage == 'init':
        fn = lambda keys: module.init(keys, x)
    elif stage == 'lazy_init':
        fn = lambda keys: module.lazy_init(keys, jax.ShapeDtypeStruct(x.shape, x.dtype))
    else:
        variables = module.init({'params': jax.random.key(2), 'dropout': jax.random.key(3)}, x)
        fn = lambda keys: module.apply(variables, x, rngs={'dropout': keys['dropout']})
    if jit:
        fn = jax.jit(fn)
    with jax_settings({'jax_debug_key_reuse': True}):
        try:
            out = fn(keys)
        except Exception as error:
            return 'error', type(error)
        consumed = {}
        for name, key in keys.items():
            try:
                jax.random.split(key)
                consumed[name] = False
            except jax.errors.KeyReuseError:
                consumed[name] = True
    return 'ok', jax.tree_util.tree_map(np.asarray, out), consumed


@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
@pytest.mark.parametrize('stage', ['init', 'lazy_init', 'apply'])
@pytest.mark.parametrize('model', ['scan', 'vmap'])
def test_key_reuse_checker_with_lifted_splits(model, stage, jit):
    # nn.scan and nn.vmap split the scope's keys into per-step (per-lane) keys. As in
    # Flax, they split a clone, so the checker accepts a second call in the same scope
    # and leaves the user's keys unconsumed; linen split the keys themselves: a shared
    # scan called twice, or any lazy_init through a scan, raised KeyReuseError.
    theirs = _key_reuse_run(flax_nn, model, stage, jit)
    ours = _key_reuse_run(linen_nn, model, stage, jit)
    assert theirs[0] == 'ok', theirs
    assert ours[0] == 'ok', ours
    assert ours[2] == theirs[2]
    assert_same_bits(ours[1], theirs[1])


def _carry_created_in_the_loop(nn):
    class Count(nn.Module):
        @nn.compact
        def __call__(self, c, x):
            count = self.variable('state', 'count', lambda: jnp.zeros((), jnp.float32))
            count.value = count.value + 1.0
            h = c + x + 0.1 * count.value
            return h, h

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            scan = nn.scan(Count, variable_axes={'params': 0}, variable_carry='state')
            return scan()(jnp.zeros(x.shape[1:], x.dtype), x)[1]

    return Model()


@pytest.mark.parametrize('disable_jit', [False, True], ids=['jit', 'disable_jit'])
def test_scan_step_creating_a_carried_variable(disable_jit):
    # Documented difference D9 (docs/differences.md): with jit on both refuse the loop
    # (the carry's structure changes); under disable_jit lax.scan is a Python loop and
    # Flax runs it, while linen refuses it as with jit on.
    from linen.transforms.errors import ScanCarryCreationError

    x = jnp.ones((2, 3), jnp.float32)
    with jax_settings({'jax_disable_jit': disable_jit}):
        if disable_jit:
            ys, variables = _carry_created_in_the_loop(flax_nn).init_with_output(
                jax.random.key(0), x
            )
            # two steps: the count is 1, then 2; each step adds 0.1 * count to c + x
            np.testing.assert_allclose(ys, [[1.1] * 3, [2.3] * 3], rtol=1e-6)
            assert float(variables['state']['ScanCount_0']['count']) == 2.0
        else:
            with pytest.raises(TypeError, match='carry'):
                _carry_created_in_the_loop(flax_nn).init(jax.random.key(0), x)
        with pytest.raises(ScanCarryCreationError, match='"state"') as info:
            _carry_created_in_the_loop(linen_nn).init(jax.random.key(0), x)
    assert isinstance(info.value, TypeError)
