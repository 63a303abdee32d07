"""Flax as oracle for tracebacks: an error leaving init/apply shows the user's frames only.

Flax hides its own frames (and JAX's) from errors that leave its entry points; linen
hides its own (``linen.core.tracebacks``). Each case runs one program on both libraries
and compares the traceback's frames (file, function, line): the user's frames (this
file's) and, for an error JAX raises, JAX's, the same on both sides.
"""

from __future__ import annotations

import os
import traceback

import jax
import jax.numpy as jnp
import pytest

import linen
import linen.nn as linen_nn
from linen.core import config

pytestmark = pytest.mark.flax
flax_nn = pytest.importorskip('flax.linen')

X = jnp.ones((2, 3))


def _models(nn):
    class Raises(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(3)(x)
            raise ValueError('from the user')

    class Outer(nn.Module):
        @nn.compact
        def __call__(self, x):
            return Raises()(nn.Dense(3)(x))

    class WritesStats(nn.Module):
        @nn.compact
        def __call__(self, x):
            stats = self.variable('batch_stats', 'mean', jnp.zeros, (3,))
            stats.value = x.mean(0)  # 'batch_stats' immutable in apply
            return x

    class WrongRank(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(3)(x) @ jnp.ones((4, 4))  # a shape error of JAX's

    return Outer(), WritesStats(), WrongRank()


def _cases(nn):
    outer, writes, wrong = _models(nn)
    key = jax.random.key(0)
    writes_vars = writes.init(key, X)
    dense_vars = {'params': {'Dense_0': {'kernel': jnp.ones((3, 3)), 'bias': jnp.zeros(3)}}}
    return {
        'user error in init': lambda: outer.init(key, X),
        'user error in init_with_output': lambda: outer.init_with_output(key, X),
        'user error in lazy_init': lambda: outer.lazy_init(
            key, jax.ShapeDtypeStruct((2, 3), jnp.float32)
        ),
        'user error under jit(init)': lambda: jax.jit(outer.init)(key, X),
        'library error in apply': lambda: writes.apply(writes_vars, X),
        'library error under jit(apply)': lambda: jax.jit(writes.apply)(writes_vars, X),
        'JAX error in apply': lambda: wrong.apply(dense_vars, X),
        # errors raised before the user's code runs: the entry point's line is hidden too
        'apply on the class': lambda: type(writes).apply(writes_vars, X),
        'rngs that are no key in apply': lambda: outer.apply(writes_vars, X, rngs=5),
        'a method name the module lacks': lambda: writes.apply(writes_vars, X, method='nope'),
        'rngs that are no key in init': lambda: outer.init(5, X),
    }


def _frames(run) -> tuple[type, list[tuple[str, str, int]]]:
    try:
        run()
    except Exception as e:  # the case's error, whatever its class (compared below)
        frames = traceback.extract_tb(e.__traceback__)
        return type(e).__name__, [(f.filename, f.name, f.lineno) for f in frames]
    raise AssertionError('the case raised nothing')


CASES = list(_cases(linen_nn))


def _in(package, filename: str) -> bool:
    return any(filename.startswith(os.path.join(d, '')) for d in package.__path__)


@pytest.mark.parametrize('case', CASES)
def test_traceback_shows_the_frames_flaxs_shows(case):
    import flax

    ours_class, ours = _frames(_cases(linen_nn)[case])
    theirs_class, theirs = _frames(_cases(flax_nn)[case])
    assert ours_class == theirs_class
    # Flax leaves one of its frames in lazy_init's traceback (flax/core/partial_eval.py);
    # the user's frames and JAX's are the same on both sides.
    assert ours == [f for f in theirs if not _in(flax, f[0])]
    assert not any(_in(linen, filename) for filename, _, _ in ours), ours


def test_filter_frames_off_keeps_linens_frames():
    run = _cases(linen_nn)['library error in apply']
    with config.temp_flip_flag('filter_frames', False):
        _, kept = _frames(run)
    _, filtered = _frames(run)
    assert len(kept) > len(filtered)
    assert any('/linen/' in filename for filename, _, _ in kept)
