"""Fuzz reproducer init_structure_1: init / structure.

First seen:
    [init] structure: /params/Custom2_0 only under Flax

Found by `nox -s fuzz` (seed r2, program 6), shrunk. `python integration_tests/fuzz/reproducers/init_structure_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/structure/clone.compact+custom.param+custom.setup+lift.jit'
STAGE = 'init'
KIND = 'structure'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed r2, program 6).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Custom1(nn.Module):
    def setup(self):
        self.w = self.param('w', nn.initializers.normal(0.5), (FEATURES,))
    def __call__(self, x):
        x = x * jnp.broadcast_to(self.w, x.shape)
        return x

class Clone2(nn.Module):
    layer: nn.Module
    @nn.compact
    def __call__(self, x):
        x = self.layer.clone(parent=self, name='copy0')(x)
        return self.layer.clone(parent=self, name='copy1')(x)

Jitted3 = nn.jit(Clone2)

def make_model():
    return Jitted3(layer=Custom1())
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
