"""Fuzz reproducer init_raises_3: init / raises.

First seen:
    [init] raises: only Flax raises AssertionError:

Found by `nox -s fuzz` (seed 6, program 189), shrunk. `python integration_tests/fuzz/reproducers/init_raises_3.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/custom.compact+custom.perturb+lift.scan+lift.scan.params_axis=None'
STAGE = 'init'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 6, program 189).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True

class Custom1(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = self.perturb('p', x)
        return x

class Cell2(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        h = Custom1()(c + x)
        return h, h

Scanned3 = nn.scan(
    Cell2,
    variable_axes={'params': nn.broadcast, 'perturbations': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
)

class Scan4(nn.Module):
    @nn.compact
    def __call__(self, x):
        c, ys = Scanned3()(jnp.zeros(x.shape[1:], x.dtype), x)
        return ys

def make_model():
    return Scan4()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
