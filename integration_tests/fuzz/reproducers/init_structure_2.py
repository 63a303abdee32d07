"""Fuzz reproducer init_structure_2: init / structure.

First seen:
    [init] structure: /params/layers_1/sub1/sub1 only under Flax

Found by `nox -s fuzz` (seed ls39-old-1, program 269; FINDINGS F26), shrunk. `python integration_tests/fuzz/reproducers/init_structure_2.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/structure/children.field+container.compact+layer.RMSNorm+share_scope'
STAGE = 'init'
KIND = 'structure'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ls39-old-1, program 269).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Block2(nn.Module):
    sub0: nn.Module
    @nn.compact
    def __call__(self, x):
        x = self.sub0(x)
        return x

class Block1(nn.Module):
    sub0: nn.Module
    @nn.compact
    def __call__(self, x):
        x = self.sub0(x)
        return x

class Shared3(nn.Module):
    def setup(self):
        self.inner = Block1(sub0=Block2(sub0=nn.RMSNorm()))
        nn.share_scope(self, self.inner)
    def __call__(self, x):
        return self.inner(x)

def make_model():
    return Shared3()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
