"""Fuzz reproducer init_error_type_1: init / error-type.

First seen:
    [init] error-type: Flax AssertionError (AssertionError), linen TypeError ('TypeError', 'Exception', 'BaseException', 'object'):  | scan body function carry input and carry output must have the same pytree structure, but they differ:

    The input carry component state[0][0] is a <cla

Found by `nox -s fuzz` (seed ci, program 3, reduced by hand), shrunk. `python integration_tests/fuzz/reproducers/init_error_type_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/error-type/scan-variable_carry'
STAGE = 'init'
KIND = 'error-type'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ci, program 3, reduced by hand).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 2, 3)
HEAD = False
METHOD_BY_NAME = True

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
    variable_axes={'params': nn.broadcast},
    split_rngs={'params': False, 'dropout': True, 'noise': False},
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

    sys.exit(main(SOURCE, STAGE, KIND))
