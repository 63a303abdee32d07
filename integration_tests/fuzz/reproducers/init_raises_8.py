"""Fuzz reproducer init_raises_8: init / raises.

First seen:
    [init] raises: only linen raises KeyReuseError: Previously-consumed key passed to random_split at index 0
    See https://docs.jax.dev/en/latest/101/errors.html#jax.errors.KeyReuseError

Found by `nox -s fuzz` (seed 5302, program 26), shrunk. `python integration_tests/fuzz/reproducers/init_raises_8.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/combine.twice+container.compact+layer.Dense+lift.scan'
STAGE = 'init'
KIND = 'raises'
SETTINGS = {'jax_debug_key_reuse': True}
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 5302, program 26).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Cell2(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        h = nn.Dense(FEATURES)(c + x)
        return h, h

Scanned3 = nn.scan(
    Cell2,
    variable_axes={'params': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
)

class Scan4(nn.Module):
    @nn.compact
    def __call__(self, x):
        c, ys = Scanned3()(jnp.zeros(x.shape[1:], x.dtype), x)
        return ys

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        m0 = Scan4()
        x = m0(m0(x))
        return x

def make_model():
    return Block1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND, settings=SETTINGS))
