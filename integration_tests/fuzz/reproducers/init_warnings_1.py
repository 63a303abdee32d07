"""Fuzz reproducer init_warnings_1: init / warnings.

First seen:
    [init] warnings: Flax ('DeprecationWarning',), linen ()

Found by `nox -s fuzz` (seed 1, program 7), shrunk. `python integration_tests/fuzz/reproducers/init_warnings_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/warnings/layer.SelfAttention'
STAGE = 'init'
KIND = 'warnings'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 1, program 7).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False

def make_model():
    return nn.SelfAttention(num_heads=1, qkv_features=4, out_features=FEATURES, deterministic=True)
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
