"""Fuzz reproducer lazy_init_raises_2: lazy_init / raises.

First seen:
    [lazy_init] raises: only linen raises LazyInitError: Lazy init encountered a value that could with the given inputs: it can only be computed with concrete inputs (variables batch_stats/c0/Map_variablesScan8_0/ScanCell6_0/BatchNorm_0/mean, batch_stats/c0/Map_variablesScan8_0/ScanCell6_0/BatchNorm_0/var, params/c0/Map_variablesScan8_0/ScanCell6_0/BatchN

Found by `nox -s fuzz` (seed 1, program 11), shrunk. `python integration_tests/fuzz/reproducers/lazy_init_raises_2.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'lazy_init/raises/layer.Dense+lift.scan'
STAGE = 'lazy_init'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 1, program 11).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False

class Cell1(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        h = nn.Dense(FEATURES)(c + x)
        return h, h

Scanned2 = nn.scan(
    Cell1,
    variable_axes={'params': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
)

class Scan3(nn.Module):
    @nn.compact
    def __call__(self, x):
        c, ys = Scanned2()(jnp.zeros(x.shape[1:], x.dtype), x)
        return ys

def make_model():
    return Scan3()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
