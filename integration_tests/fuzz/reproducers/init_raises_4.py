"""Fuzz reproducer init_raises_4: init / raises.

First seen:
    [init] raises: only Flax raises NameInUseError: Could not create submodule "inner" in Module Shared2: Name in use. (https://flax.readthedocs.io/en/latest/api_reference/flax.errors.html#flax.errors.NameInUseError)

Found by `nox -s fuzz` (seed 6, program 202), shrunk. `python integration_tests/fuzz/reproducers/init_raises_4.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/layer.Dense+share_scope'
STAGE = 'init'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 6, program 202).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True

class Shared1(nn.Module):
    def setup(self):
        self.inner = nn.Dense(FEATURES)
        nn.share_scope(self, self.inner)
    def __call__(self, x):
        return self.inner(x)

class Shared2(nn.Module):
    def setup(self):
        self.inner = Shared1()
        nn.share_scope(self, self.inner)
    def __call__(self, x):
        return self.inner(x)

def make_model():
    return Shared2()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
