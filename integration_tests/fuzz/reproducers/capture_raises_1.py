"""Fuzz reproducer capture_raises_1: capture / raises.

First seen:
    [capture] raises: only Flax raises AttributeError: 'SequenceKey' object has no attribute 'key'

Found by `nox -s fuzz` (seed cap11, program 123), shrunk. `python integration_tests/fuzz/reproducers/capture_raises_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'capture/raises/combine.twice+container.compact+layer.SpectralNorm'
STAGE = 'capture'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed cap11, program 123).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False
PENALTY = False

class Spectral2(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.SpectralNorm(nn.Dense(FEATURES))(x, update_stats=True)

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        m0 = Spectral2()
        x = m0(m0(x))
        return x

def make_model():
    return Block1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
