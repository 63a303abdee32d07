"""Trace reuse: a repeated block's Python runs once per trace, and nothing else changes.

Values are compared with the same model traced with reuse off (ordinary tracing,
which the rest of the suite checks against Flax) and with hand-written JAX; the
Flax differential test is ``integration_tests/test_flax_reuse.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.core import config
from linen.transforms import linen_reuse_traces

BLOCK_RUNS: list[str] = []


class Block(nn.Module):
    width: int

    @nn.compact
    def __call__(self, x, *, scale: float = 1.0):
        BLOCK_RUNS.append(self.name)
        h = nn.LayerNorm()(x)
        h = nn.relu(nn.Dense(2 * self.width)(h))
        h = nn.Dropout(0.5)(h, deterministic=not self.has_rng('dropout'))
        self.sow('intermediates', 'hidden', h)
        return x + scale * nn.Dense(self.width)(h)


class Stack(nn.Module):
    blocks: int = 12
    width: int = 8

    @nn.compact
    def __call__(self, x):
        for _ in range(self.blocks):
            x = Block(self.width)(x)
        return nn.Dense(3)(x)


X = jax.random.normal(jax.random.key(1), (2, 8))


@pytest.fixture(autouse=True)
def _clear_runs():
    BLOCK_RUNS.clear()
    # References trace ordinarily even when the suite runs with LINEN_REUSE_TRACES=1.
    with linen_reuse_traces(False):
        yield
    BLOCK_RUNS.clear()


def _equal(a, b):
    flat_a, tree_a = jax.tree_util.tree_flatten(a)
    flat_b, tree_b = jax.tree_util.tree_flatten(b)
    assert tree_a == tree_b
    for u, v in zip(flat_a, flat_b):
        np.testing.assert_array_equal(u, v)


def _apply(variables, x, **kw):
    return Stack().apply(variables, x, **kw)


def _trace(variables, x):
    # a fresh function each time, so no JAX tracing cache answers
    return jax.make_jaxpr(lambda v, y: _apply(v, y))(variables, x)


def test_off_by_default_and_on_with_the_environment_switch():
    assert config.flags()['linen_reuse_traces'].default is False
    script = 'from linen.core import config; print(config.linen_reuse_traces)'
    for value, expected in (('1', 'True'), ('0', 'False')):
        env = dict(os.environ, LINEN_REUSE_TRACES=value)
        out = subprocess.run(
            [sys.executable, '-c', script], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == expected
    variables = Stack().init(jax.random.key(0), X)
    BLOCK_RUNS.clear()
    _trace(variables, X)
    assert len(BLOCK_RUNS) == 12


def test_a_twelve_block_model_traces_its_block_once():
    variables = Stack().init(jax.random.key(0), X)
    BLOCK_RUNS.clear()
    with linen_reuse_traces():
        _trace(variables, X)
        assert BLOCK_RUNS == ['Block_0']
        # Each trace has its own programs: a new trace runs the block again, once.
        _trace(variables, X)
    assert BLOCK_RUNS == ['Block_0', 'Block_0']
    _trace(variables, X)  # off again outside the block
    assert len(BLOCK_RUNS) == 14


def test_init_variables_and_rngs_are_those_of_ordinary_tracing():
    ref = jax.jit(Stack().init)(jax.random.key(0), X)
    BLOCK_RUNS.clear()
    with linen_reuse_traces():
        got = jax.jit(Stack().init)(jax.random.key(0), X)
    # init draws random numbers: one abstract run learns which path hashes it needs
    assert len(BLOCK_RUNS) == 2
    _equal(got, ref)
    # every block got its own parameters (rngs derived from each block's path)
    kernels = [got['params'][f'Block_{i}']['Dense_0']['kernel'] for i in range(12)]
    assert len({np.asarray(k).tobytes() for k in kernels}) == 12


def test_outputs_dropout_sow_and_grads_match_ordinary_tracing():
    variables = Stack().init(jax.random.key(0), X)
    rngs = {'dropout': jax.random.key(7)}

    def loss(v, x):
        y, state = Stack().apply(v, x, rngs=rngs, mutable=['intermediates'])
        return jnp.sum(y * y), state

    ref = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(variables, X)
    with linen_reuse_traces():
        got = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(variables, X)
    _equal(got, ref)
    hidden = got[0][1]['intermediates']['Block_3']['hidden'][0]
    # dropout masks differ per block: each block's rng is its own
    masks = {np.asarray(got[0][1]['intermediates'][f'Block_{i}']['hidden'][0] == 0).tobytes()
             for i in range(12)}  # fmt: skip
    assert len(masks) == 12 and hidden.shape == (2, 16)


def test_matches_hand_written_jax():
    variables = Stack(blocks=3).init(jax.random.key(0), X)
    p = variables['params']

    def ln(q, x):
        mean = x.mean(-1, keepdims=True)
        var = jnp.maximum((x * x).mean(-1, keepdims=True) - mean * mean, 0.0)
        return (x - mean) * jax.lax.rsqrt(var + 1e-6) * q['scale'] + q['bias']

    def block(q, x):
        h = jax.nn.relu(ln(q['LayerNorm_0'], x) @ q['Dense_0']['kernel'] + q['Dense_0']['bias'])
        return x + (h @ q['Dense_1']['kernel'] + q['Dense_1']['bias'])

    x = X
    with jax.numpy_rank_promotion('allow'):
        for i in range(3):
            x = block(p[f'Block_{i}'], x)
        expected = x @ p['Dense_0']['kernel'] + p['Dense_0']['bias']
    with linen_reuse_traces():
        got = jax.jit(lambda v, x: Stack(blocks=3).apply(v, x))(variables, X)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_mutable_collections_are_written_back():
    class BNBlock(nn.Module):
        @nn.compact
        def __call__(self, x):
            return x + nn.Dense(4)(nn.BatchNorm(use_running_average=False)(x))

    class BNStack(nn.Module):
        @nn.compact
        def __call__(self, x):
            for _ in range(4):
                x = BNBlock()(x)
            return x

    x = jax.random.normal(jax.random.key(2), (5, 4))
    variables = BNStack().init(jax.random.key(0), x)

    def step(v, x):
        return BNStack().apply(v, x, mutable=['batch_stats'])

    ref = jax.jit(lambda v, y: step(v, y))(variables, x)
    with linen_reuse_traces():
        got = jax.jit(lambda v, y: step(v, y))(variables, x)
    _equal(got, ref)
    assert set(got[1]['batch_stats']) == {f'BNBlock_{i}' for i in range(4)}


def test_each_block_keeps_its_profiling_label_and_costs():
    from linen.profiling import module_costs

    variables = Stack(blocks=4).init(jax.random.key(0), X)

    def fn(v, x):
        return Stack(blocks=4).apply(v, x)

    ref = module_costs(lambda v, y: fn(v, y), variables, X)
    with linen_reuse_traces():
        text = jax.jit(lambda v, y: fn(v, y)).lower(variables, X).compile().as_text()
        got = module_costs(lambda v, y: fn(v, y), variables, X)
    for i in range(4):
        # Block_0 is traced into the reused program, the others call it; each
        # instance's label is its own, JAX adds the program's name after it.
        assert re.search(f'Stack/Block_{i}/jit\\(linen_reuse\\)/Dense_1/dot_general', text)
        assert got[f'Stack/Block_{i}'].flops == ref[f'Stack/Block_{i}'].flops > 0
        assert got[f'Stack/Block_{i}/Dense_0'].flops == ref[f'Stack/Block_{i}/Dense_0'].flops


def test_each_block_keeps_its_backward_costs_in_a_train_step():
    # The kernel gradient's convolution is rebuilt by XLA without a label; the
    # report finds it in the unoptimized program, where a reused block is one
    # function called once per instance: each call gets its own label.
    class ConvBlock(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.relu(nn.Conv(4, (3, 3), use_bias=False)(x))

    class ConvStack(nn.Module):
        @nn.compact
        def __call__(self, x):
            for _ in range(3):
                x = ConvBlock()(x)
            return x

    from linen.profiling import module_costs

    # (3 channels in: the first block is a program of its own, the others share one)
    x = jnp.ones((2, 6, 6, 3))
    variables = ConvStack().init(jax.random.key(0), x)

    def costs():
        # a fresh function each time, so no JAX tracing cache answers
        def step(v, x):
            return jax.grad(lambda v: jnp.sum(ConvStack().apply(v, x) ** 2))(v)

        return module_costs(step, variables, x)

    ref = costs()
    with linen_reuse_traces():
        got = costs()
    assert any('jit(linen_reuse)' in i.op_name for i in got.instructions)
    for i in range(3):
        path = f'ConvStack/ConvBlock_{i}/Conv_0'
        # SAME padding: at most 9 taps per output position
        assert 0 < ref[path].forward_flops <= 2 * 2 * 6 * 6 * 4 * (3 if i == 0 else 4) * 9
        assert got[path].forward_flops == ref[path].forward_flops
        # the kernel gradient, and the input gradient for all but the first block
        assert ref[path].backward_flops == (1 if i == 0 else 2) * ref[path].forward_flops
        assert got[path].backward_flops == ref[path].backward_flops


SETUP_RUNS: list[str] = []


class SetupBlock(nn.Module):
    def setup(self):
        SETUP_RUNS.append(self.name)
        self.inner = nn.Dense(8)

    def __call__(self, x):
        return x + jnp.tanh(self.inner(x))


class SetupStack(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(4):
            x = SetupBlock()(x)
        return x


def test_setup_of_a_reused_block_runs_once_per_program():
    variables = SetupStack().init(jax.random.key(0), X)
    ref = jax.jit(SetupStack().apply)(variables, X)
    SETUP_RUNS.clear()
    with linen_reuse_traces():
        got = jax.jit(SetupStack().apply)(variables, X)
    # On the reused program's copy of the first block only: the instances do not
    # set themselves up outside (nothing needs their submodules there).
    assert SETUP_RUNS == ['SetupBlock_0']
    _equal(got, ref)
    with linen_reuse_traces(False):
        SETUP_RUNS.clear()
        jax.jit(lambda v, x: SetupStack().apply(v, x))(variables, X)
    assert len(SETUP_RUNS) == 4


def test_an_eager_grad_or_remat_is_not_reused():
    # Traced by an eager grad, the model's operations run one by one; a reused
    # block would run as a compiled program, which may round differently.
    variables = Stack(blocks=3).init(jax.random.key(0), X)

    def loss(params):
        return jnp.sum(Stack(blocks=3).apply({'params': params}, X) ** 2)

    ref = jax.grad(loss)(variables['params'])
    BLOCK_RUNS.clear()
    with linen_reuse_traces():
        got = jax.grad(loss)(variables['params'])
    assert len(BLOCK_RUNS) == 3
    _equal(got, ref)

    class RematStack(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.remat(Stack)(blocks=3)(x)

    variables = RematStack().init(jax.random.key(0), X)
    ref = RematStack().apply(variables, X)
    BLOCK_RUNS.clear()
    with linen_reuse_traces():
        got = RematStack().apply(variables, X)
    assert len(BLOCK_RUNS) == 3  # remat's body is traced, but runs op by op
    _equal(got, ref)


def test_lazy_init_is_not_reused():
    # lazy_init traces the forward but runs the initializers op by op on concrete
    # keys; blocks under nn.vmap see traced keys, and a reused block there would
    # compute its parameters as a compiled program, which may round differently.
    class Inner(nn.Module):
        @nn.compact
        def __call__(self, x):
            attend = nn.MultiHeadDotProductAttention(
                num_heads=1, qkv_features=4, out_features=3, deterministic=True
            )
            return attend(attend(x))

    class Top(nn.Module):
        @nn.compact
        def __call__(self, x):
            mapped = nn.vmap(
                Inner,
                variable_axes={'params': 0},
                split_rngs={'params': True},
                in_axes=0,
                out_axes=0,
            )
            return mapped()(x)

    class Plain(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Inner()(x)

    # Top: keys traced under nn.vmap; Plain: variables made by a reused call come
    # out of a compiled call, so lazy_init evaluates its pruned program instead.
    for model, shape in ((Top(), (2, 2, 2, 3)), (Plain(), (2, 2, 3))):
        x = jax.ShapeDtypeStruct(shape, jnp.float32)
        ref = model.lazy_init(jax.random.key(0), x)
        with linen_reuse_traces():
            got = model.lazy_init(jax.random.key(0), x)
        _equal(got, ref)


def test_unhashable_attributes_fall_back_to_ordinary_tracing():
    class Scaled(nn.Module):
        factor: np.ndarray  # unhashable: reuse cannot key on it

        @nn.compact
        def __call__(self, x):
            BLOCK_RUNS.append(self.name)
            return nn.Dense(x.shape[-1])(x) * self.factor

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            for i in range(3):
                x = Scaled(np.full((), i + 1.0))(x)
            return x

    variables = Outer().init(jax.random.key(0), X)
    ref = jax.jit(Outer().apply)(variables, X)
    BLOCK_RUNS.clear()
    with linen_reuse_traces():
        got = jax.jit(Outer().apply)(variables, X)
    assert BLOCK_RUNS == ['Scaled_0', 'Scaled_1', 'Scaled_2']
    _equal(got, ref)


def test_different_attributes_or_shapes_are_different_programs():
    class Mixed(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = Block(8)(x)
            x = Block(8)(x, scale=2.0)  # a static argument of its own
            x = Block(8)(x)
            x = nn.Dense(4)(x)
            return Block(4)(x)  # other attributes, other shapes

    variables = Mixed().init(jax.random.key(0), X)
    ref = jax.jit(Mixed().apply)(variables, X)
    BLOCK_RUNS.clear()
    with linen_reuse_traces():
        got = jax.jit(Mixed().apply)(variables, X)
    assert BLOCK_RUNS == ['Block_0', 'Block_1', 'Block_3']
    _equal(got, ref)


def test_a_shared_module_called_inside_falls_back():
    class Tied(nn.Module):
        shared: nn.Module

        @nn.compact
        def __call__(self, x):
            BLOCK_RUNS.append(self.name)
            return x + self.shared(x)

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            shared = nn.Dense(8)
            for _ in range(3):
                x = Tied(shared)(x)
            return x

    variables = Outer().init(jax.random.key(0), X)
    ref = jax.jit(Outer().apply)(variables, X)
    BLOCK_RUNS.clear()
    with linen_reuse_traces():
        got = jax.jit(Outer().apply)(variables, X)
    assert len(BLOCK_RUNS) == 3
    _equal(got, ref)


def test_a_module_bound_outside_the_block_falls_back_before_it_runs():
    class Reader(nn.Module):
        head: object  # a function calling a module bound in the parent

        @nn.compact
        def __call__(self, x):
            BLOCK_RUNS.append(self.name)
            return x + jnp.tanh(self.head(nn.Dense(8)(x)))

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            shared = nn.Dense(8)

            def head(h):
                return shared(h)

            for _ in range(3):
                x = Reader(head)(x)
            return x

    ref_vars = jax.jit(Outer().init)(jax.random.key(0), X)
    ref = jax.jit(Outer().apply)(ref_vars, X)
    with linen_reuse_traces():
        variables = jax.jit(Outer().init)(jax.random.key(0), X)
        BLOCK_RUNS.clear()
        got = jax.jit(Outer().apply)(variables, X)
    _equal(variables, ref_vars)
    # the first Reader's reuse trace stops at the shared module; all run ordinarily
    assert BLOCK_RUNS == ['Reader_0', 'Reader_0', 'Reader_1', 'Reader_2']
    _equal(got, ref)


def test_eager_calls_are_not_reused():
    variables = Stack(blocks=3).init(jax.random.key(0), X)
    ref = Stack(blocks=3).apply(variables, X)
    BLOCK_RUNS.clear()
    with linen_reuse_traces():
        got = Stack(blocks=3).apply(variables, X)
    assert len(BLOCK_RUNS) == 3
    _equal(got, ref)


def test_capture_intermediates_falls_back():
    variables = Stack(blocks=3).init(jax.random.key(0), X)

    def fn(v, x):
        return Stack(blocks=3).apply(v, x, capture_intermediates=True, mutable=['intermediates'])

    ref = jax.jit(lambda v, y: fn(v, y))(variables, X)
    BLOCK_RUNS.clear()
    with linen_reuse_traces():
        got = jax.jit(lambda v, y: fn(v, y))(variables, X)
    assert len(BLOCK_RUNS) == 3
    _equal(got, ref)


def test_config_flag_switches_it_and_the_context_manager_wins():
    variables = Stack().init(jax.random.key(0), X)
    with linen_reuse_traces(None):  # follow the flag
        for flag, runs in ((False, 12), (True, 1)):
            with config.temp_flip_flag('reuse_traces', flag):
                BLOCK_RUNS.clear()
                _trace(variables, X)
                assert len(BLOCK_RUNS) == runs
        with config.temp_flip_flag('reuse_traces', True), linen_reuse_traces(False):
            BLOCK_RUNS.clear()
            _trace(variables, X)
            assert len(BLOCK_RUNS) == 12


def test_nn_jit_blocks_drawing_rngs_inside_a_reused_block_fall_back():
    class Inner(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.jit(nn.Dense)(8)(x)

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            for _ in range(3):
                x = Inner()(x)
            return x

    ref = jax.jit(Outer().init)(jax.random.key(0), X)
    with linen_reuse_traces():
        got = jax.jit(Outer().init)(jax.random.key(0), X)
    _equal(got, ref)


def _reused_calls(closed):
    # the reused programs' equations (the compiled function is named `linen_reuse`)
    return [
        e
        for e in closed.jaxpr.eqns
        if e.primitive.name in ('jit', 'pjit') and e.params.get('name') == 'linen_reuse'
    ]


def test_a_reused_call_that_draws_no_rng_passes_its_arrays_alone():
    # apply without rngs needs no path hashes: each reused call's equation takes
    # the block's variables and input only (no constant per call to trace,
    # differentiate and lower), and the program has no constants at all.
    variables = Stack().init(jax.random.key(0), X)
    BLOCK_RUNS.clear()
    with linen_reuse_traces():
        closed = _trace(variables, X)
    assert not closed.consts and not closed.jaxpr.constvars
    per_block = len(jax.tree_util.tree_leaves(variables['params']['Block_0'])) + 1
    # (the final Dense may go through the lifted jit once, while reuse learns it
    # is a leaf; it is not one of the blocks)
    calls = [e for e in _reused_calls(closed) if len(e.invars) == per_block]
    assert len(calls) == 12
    # every call is the same program (one jaxpr object), so JAX's caches of its
    # linearization and transposition serve all but the first
    assert len({id(e.params['jaxpr']) for e in calls}) == 1
    assert BLOCK_RUNS == ['Block_0']


def test_a_reused_call_that_draws_rngs_gets_its_path_hashes_as_an_argument():
    variables = Stack().init(jax.random.key(0), X)
    rngs = {'dropout': jax.random.key(7)}
    ref = jax.jit(lambda v, x: Stack().apply(v, x, rngs=rngs))(variables, X)
    with linen_reuse_traces():
        closed = jax.make_jaxpr(lambda v, x: Stack().apply(v, x, rngs=rngs))(variables, X)
        got = jax.jit(lambda v, x: Stack().apply(v, x, rngs=rngs))(variables, X)
    per_block = len(jax.tree_util.tree_leaves(variables['params']['Block_0'])) + 1
    # the block's variables, its input, the dropout key and the table of path hashes
    calls = [e for e in _reused_calls(closed) if len(e.invars) == per_block + 2]
    assert len(calls) == 12
    assert {str(e.invars[-2].aval) for e in calls} == {'uint32[1]'}
    _equal(got, ref)


def test_the_lifted_jit_learns_its_path_hashes_once_per_program():
    # The first call of a program learns which path hashes it needs (none for
    # apply); later calls, and a second trace, find the answer in the cache.
    from linen.transforms._jit import _ScopeJit

    learned = []
    original = _ScopeJit._call_learning_hashes

    def spy(self, static, *args):
        if type(static.payload['extra'][1]) is Block:  # (not the final Dense)
            learned.append(static in self.needed)
        return original(self, static, *args)

    variables = Stack().init(jax.random.key(0), X)
    _ScopeJit._call_learning_hashes = spy
    try:
        with linen_reuse_traces():
            _trace(variables, X)
    finally:
        _ScopeJit._call_learning_hashes = original
    assert learned == [False] + [True] * 11
