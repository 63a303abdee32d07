"""Fuzz reproducer init_raises_7: init / raises, in JAX's 64-bit mode.

First seen:
    [init] raises: only Flax raises TypeError: scan body function carry input and carry output must have equal types, but they differ:

    The input carry component c[1] has type float32[2,3] but the corresponding output carry component has type float64[2,3], so the dtypes do not match.

Found by `python -m integration_tests.fuzz` under `JAX_ENABLE_X64=1` (seed x64a,
program 46), shrunk. In 64-bit mode `nn.initializers.normal` makes a float64 parameter,
so the input of the `nn.RNN` is float64 while the carry Flax builds is float32.
`X64 = True` runs it in that mode (the suite runs in JAX's default one).
`python integration_tests/fuzz/reproducers/init_raises_7.py` prints the differences
between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/container.compact+custom.compact+custom.param+layer.GRU'
STAGE = 'init'
KIND = 'raises'
SETTINGS = {'jax_enable_x64': True}
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed x64a, program 46).
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
        w = self.param('w', nn.initializers.normal(0.5), (FEATURES,))
        x = x * jnp.broadcast_to(w, x.shape)
        return x

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Custom2()(x)
        x = nn.RNN(nn.GRUCell(FEATURES))(x)
        return x

def make_model():
    return Block1()
"""


if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND, settings=SETTINGS))
