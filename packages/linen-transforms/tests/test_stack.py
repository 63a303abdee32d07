"""Where the lifted ``jit`` runs JAX's heavy work: at the bottom of a fresh stack chunk.

CPython allocates and frees a 16 KiB stack chunk each time a call crosses a chunk's
end (gh-142183); a loop at that depth is slowed many times over. ``on_fresh_chunk``
calls through a frame bigger than a chunk, which CPython must place at the bottom
of a new one. Speed is the benchmarks' business (``benchmarks/``, the reuse rows);
here: the runner's frame is that big, it calls what it is given, and the lifted
``jit`` uses it exactly where JAX traces, linearizes or batches.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import linen.nn as nn
from linen.transforms import _jit, _stack, linen_reuse_traces

# CPython's chunk size (Python/pystate.c, DATA_STACK_CHUNK_SIZE), 3.11 to 3.13.
CHUNK_BYTES = 16 * 1024
POINTER_BYTES = 8


def test_the_runners_frame_outgrows_any_chunk_remainder_without_locals_to_clear():
    code = _stack._runner.__code__
    # Its value stack alone is larger than a whole chunk, so it never fits in what
    # is left of the current one ...
    assert code.co_stacksize * POINTER_BYTES > CHUNK_BYTES
    # ... and it is not made of local variables, which each call would clear.
    assert code.co_nlocals <= 4


def test_it_calls_what_it_is_given():
    assert _stack.on_fresh_chunk(divmod, 17, 5) == (3, 2)
    assert _stack.on_fresh_chunk(dict, a=1, fn=2) == {'a': 1, 'fn': 2}
    with pytest.raises(ZeroDivisionError):
        _stack.on_fresh_chunk(divmod, 1, 0)


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        return x + nn.Dense(4)(nn.relu(nn.Dense(4)(x)))


class Stack(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(4):
            x = Block()(x)
        return x


@pytest.fixture
def fresh_chunk_calls(monkeypatch):
    calls: list[str] = []

    def counting(fn, /, *args, **kwargs):
        calls.append(fn.__name__)
        return _stack.on_fresh_chunk(fn, *args, **kwargs)

    monkeypatch.setattr(_jit, 'on_fresh_chunk', counting)
    return calls


def test_reuse_runs_a_first_call_and_each_differentiated_call_on_a_fresh_chunk(
    fresh_chunk_calls,
):
    x = jnp.linspace(-1.0, 1.0, 8, dtype=jnp.float32).reshape(2, 4)
    variables = Stack().init(jax.random.key(0), x)

    def loss(v, x):
        return jnp.sum(Stack().apply(v, x) ** 2)

    with linen_reuse_traces(False):  # (whatever LINEN_REUSE_TRACES says)
        ref_y = jax.jit(Stack().apply)(variables, x)
        ref_g = jax.jit(jax.grad(loss))(variables, x)
    assert fresh_chunk_calls == []  # reuse off: no lifted jit at all
    with linen_reuse_traces():
        # Staged only: the first call traces the block; the three others find
        # its program in JAX's cache.
        y = jax.jit(lambda v, x: Stack().apply(v, x))(variables, x)
        assert len(fresh_chunk_calls) == 1
        # Under grad: the first call (its input carries no tangent) and the three
        # calls whose inputs are differentiated, which JAX linearizes.
        del fresh_chunk_calls[:]
        g = jax.jit(jax.grad(lambda v, x: loss(v, x)))(variables, x)
        assert len(fresh_chunk_calls) == 4
    np.testing.assert_array_equal(y, ref_y)
    for got, want in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(ref_g)):
        np.testing.assert_array_equal(got, want)


def test_an_eager_nn_jit_call_runs_on_a_fresh_chunk_only_when_it_compiles(fresh_chunk_calls):
    x = jnp.ones((2, 4), jnp.float32)
    model = nn.jit(Block)()
    variables = model.init(jax.random.key(0), x)
    del fresh_chunk_calls[:]
    first = model.apply(variables, x)
    assert len(fresh_chunk_calls) == 1
    second = model.apply(variables, x + 1)  # same shapes: JAX's cached program
    assert len(fresh_chunk_calls) == 1
    want = Block().apply(variables, x + 1)
    np.testing.assert_allclose(second, want, rtol=1e-6, atol=1e-6)
    assert first.shape == second.shape


def test_an_error_inside_a_jitted_module_shows_none_of_the_runners_frames():
    import traceback

    class Failing(nn.Module):
        @nn.compact
        def __call__(self, x):
            raise ValueError('from the body')

    with pytest.raises(ValueError, match='from the body') as info:
        nn.jit(Failing)().init(jax.random.key(0), jnp.ones(2))
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].name == '__call__'  # the user's frame that raised
    # linen's frames are left out, the runner's (compiled from source text) too
    assert not any(f.name == 'on_fresh_chunk' for f in frames)
