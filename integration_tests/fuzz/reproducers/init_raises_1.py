"""Fuzz reproducer init_raises_1: init / raises.

First seen:
    [init] raises: only linen raises TracerBoolConversionError: Attempted boolean conversion of traced array with shape bool[].
    The error occurred while tracing the function <lambda> at /work/wt-fuzz/packages/linen-transforms/src/linen/transforms/_scan.py:178 for jit. This concrete value was not available in Python because it depends on the value of the argument

Found by `nox -s fuzz` (seed 3, program 11), shrunk. `python integration_tests/fuzz/reproducers/init_raises_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/custom.compact+custom.rng+lift.scan+lift.scan.broadcast_arg=False'
STAGE = 'init'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 3, program 11).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False

class Custom1(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = x + 0.1 * jax.random.normal(self.make_rng('noise'), x.shape)
        return x

class Cell2(nn.Module):
    @nn.compact
    def __call__(self, c, x, flag):
        h = Custom1()(c + x)
        if flag:
            h = -h
        return h, h

Scanned3 = nn.scan(
    Cell2,
    variable_axes={'params': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=(0, nn.broadcast),
)

class Scan4(nn.Module):
    @nn.compact
    def __call__(self, x):
        c, ys = Scanned3()(jnp.zeros(x.shape[1:], x.dtype), x, False)
        return ys

def make_model():
    return Scan4()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
