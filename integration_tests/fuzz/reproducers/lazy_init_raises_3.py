"""Fuzz reproducer lazy_init_raises_3: lazy_init / raises.

First seen:
    [lazy_init] raises: only linen raises LazyInitError: Lazy init encountered a value that could with the given inputs: it can only be computed with concrete inputs (variables params/blocks_b0/bias, params/blocks_b0/kernel); pass concrete arrays (or `jax.ShapeDtypeStruct`s only where values are not needed).

Found by `nox -s fuzz` (seed 2, program 1), shrunk. `python integration_tests/fuzz/reproducers/lazy_init_raises_3.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'lazy_init/raises/layer.Dense+lift.jit'
STAGE = 'lazy_init'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 2, program 1).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False

Jitted1 = nn.jit(nn.Dense)

def make_model():
    return Jitted1(FEATURES)
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
