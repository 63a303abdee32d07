"""Fuzz reproducer eval_shape_warnings_2: eval_shape / warnings.

First seen:
    [eval_shape] warnings: Flax (), linen ('DeprecationWarning',)

Found by `nox -s fuzz` (seed s2, program 79), shrunk. `python integration_tests/fuzz/reproducers/eval_shape_warnings_2.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'eval_shape/warnings/clone.setup+layer.SelfAttention+lift.jit'
STAGE = 'eval_shape'
KIND = 'warnings'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed s2, program 79).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Clone1(nn.Module):
    layer: nn.Module
    def setup(self):
        self.copies = [self.layer.clone() for _ in range(2)]
    def __call__(self, x):
        for copy in self.copies:
            x = copy(x)
        return x

Jitted2 = nn.jit(Clone1)

def make_model():
    return Jitted2(layer=nn.SelfAttention(num_heads=1, qkv_features=4, out_features=FEATURES, deterministic=True))
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
