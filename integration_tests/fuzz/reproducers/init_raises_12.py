"""Fuzz reproducer init_raises_12: init / raises (documented difference D9).

First seen (seed dj60-1, program 211, with an `nn.jvp` after the scan that made it an
error-type difference): under `jax.disable_jit`, Flax's `nn.scan` lets the first step
create a variable in a `variable_carry` collection and runs; linen raises
`ScanCarryCreationError`, as both libraries do (a `TypeError`) without `disable_jit`.
Shrunk by hand to the scan.

Found by `python -m integration_tests.fuzz` under `JAX_DISABLE_JIT=1`.
`python integration_tests/fuzz/reproducers/init_raises_12.py` prints the differences
between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/container.compact+custom.compact+custom.variable+lift.scan+lift.scan.carry_state=True'
STAGE = 'init'
KIND = 'raises'
SETTINGS = {'jax_disable_jit': True}
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed dj60-1, program 211).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False
PENALTY = False

class Custom2(nn.Module):
    @nn.compact
    def __call__(self, x):
        count = self.variable('state', 'count', lambda: jnp.zeros((), jnp.float32))
        count.value = count.value + 1.0
        x = x + 0.1 * count.value
        return x

class Cell3(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        h = Custom2()(c + x)
        return h, h

Scanned4 = nn.scan(
    Cell3,
    variable_axes={'params': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
    variable_carry=['state', 'counters'],
)

class Scan5(nn.Module):
    @nn.compact
    def __call__(self, x):
        c, ys = Scanned4()(jnp.zeros(x.shape[1:], x.dtype), x)
        return ys

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Scan5()(x)
        return x

def make_model():
    return Block1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND, settings=SETTINGS))
