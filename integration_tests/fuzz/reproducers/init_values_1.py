"""Fuzz reproducer init_values_1: init / values.

First seen:
    [init] values: /params/kw/Dense_0/kernel.value: max |diff| 0.593

Found by `nox -s fuzz` (seed ci, program 138), shrunk. `python integration_tests/fuzz/reproducers/init_values_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/values/children.field+container.compact+layer.Dense+lift.map_variables+lift.map_variables.scale_in=True'
STAGE = 'init'
KIND = 'values'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ci, program 138).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Block1(nn.Module):
    sub0: nn.Module
    @nn.compact
    def __call__(self, x):
        x = self.sub0(x)
        return x

class Mapped2(nn.Module):
    @nn.compact
    def __call__(self, x):
        mapped = nn.map_variables(
            Block1, 'params', trans_in_fn=lambda vs: jax.tree_util.tree_map(lambda a: a * 0.5, vs),
            trans_out_fn=lambda vs: vs, init=self.is_initializing(), mutable=False,
        )
        return mapped(sub0=nn.Dense(FEATURES))(x)

def make_model():
    return Mapped2()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
