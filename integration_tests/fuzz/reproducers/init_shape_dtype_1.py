"""Fuzz reproducer init_shape_dtype_1: init / shape-dtype.

First seen:
    [init] shape-dtype: /state/layers_0/layers_0/subs_k0/count: Flax array(2,) float32, linen array() float32

Found by `nox -s fuzz` (seed fd, program 461), shrunk. `python integration_tests/fuzz/reproducers/init_shape_dtype_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/shape-dtype/children.fdict+container.compact+custom.compact+custom.variable+lift.vmap'
STAGE = 'init'
KIND = 'shape-dtype'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed fd, program 461).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Custom2(nn.Module):
    @nn.compact
    def __call__(self, x):
        count = self.variable('state', 'count', lambda: jnp.zeros((), jnp.float32))
        count.value = count.value + 1.0
        x = x + 0.1 * count.value
        return x

class Block1(nn.Module):
    subs: dict
    @nn.compact
    def __call__(self, x):
        x = self.subs['k0'](x)
        return x

Vmapped3 = nn.vmap(
    Block1,
    variable_axes={'params': 0, 'state': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
    out_axes=0,
)

def make_model():
    return Vmapped3(subs={'k0': Custom2()})
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
