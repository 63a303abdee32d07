"""Fuzz reproducer apply_values_ulp_1: apply / values-ulp.

First seen:
    [apply] values-ulp: [0]: max |diff| 2.33e-10

Found by `nox -s fuzz` (seed ls38-old-2, program 310), shrunk. `python integration_tests/fuzz/reproducers/apply_values_ulp_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'apply/values-ulp/layer.LSTM+lift.scan'
STAGE = 'apply'
KIND = 'values-ulp'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ls38-old-2, program 310).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Cell1(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        h = nn.RNN(nn.OptimizedLSTMCell(FEATURES))(c + x)
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
