"""Fuzz reproducer lazy_init_values_ulp_1: lazy_init / values-ulp.

First seen:
    [lazy_init] values-ulp: /params/c0/c1/ScanCell4_0/CheckpointDense_0/kernel: max |diff| 1.79e-07

Found by `nox -s fuzz` (seed reuse35-old-1, program 133), shrunk. `python integration_tests/fuzz/reproducers/lazy_init_values_ulp_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'lazy_init/values-ulp/layer.Dense+lift.remat+lift.scan'
STAGE = 'lazy_init'
KIND = 'values-ulp'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed reuse35-old-1, program 133).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

Remat1 = nn.remat(nn.Dense)

class Cell2(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        h = Remat1(FEATURES)(c + x)
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

def make_model():
    return Scan4()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
