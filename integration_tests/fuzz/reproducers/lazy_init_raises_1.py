"""Fuzz reproducer lazy_init_raises_1: lazy_init / raises.

First seen:
    [lazy_init] raises: only linen raises LazyInitError: Lazy init encountered a value that could with the given inputs: it can only be computed with concrete inputs (variables params/c1/sub1/branch/bias, params/c1/sub1/branch/scale); pass concrete arrays (or `jax.ShapeDtypeStruct`s only where values are not needed).

Found by `nox -s fuzz` (seed 1, program 4), shrunk. `python integration_tests/fuzz/reproducers/lazy_init_raises_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'lazy_init/raises/layer.LayerNorm+lift.cond'
STAGE = 'lazy_init'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 1, program 4).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False

class Cond1(nn.Module):
    @nn.compact
    def __call__(self, x):
        def on_true(mdl, x):
            return nn.LayerNorm(name='branch')(x)
        def on_false(mdl, x):
            return -nn.LayerNorm(name='branch')(x)
        return nn.cond(jnp.sum(x) > 0, on_true, on_false, self, x)

def make_model():
    return Cond1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
