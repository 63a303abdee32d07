"""Fuzz reproducer init_error_type_5: init / error-type.

First seen:
    [init] error-type: Flax IndexError (IndexError), linen ValueError ('ValueError', 'Exception', 'BaseException', 'object'): tuple index out of range | vmap was requested to map its argument along axis 0, which implies that its rank should be at least 1, but is only 0 (its shape is ())

Found by `nox -s fuzz` (seed ls38-old-2, program 1293), shrunk. `python integration_tests/fuzz/reproducers/init_error_type_5.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/error-type/custom.setup+custom.variable+lift.jit+lift.vmap'
STAGE = 'init'
KIND = 'error-type'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ls38-old-2, program 1293).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Custom1(nn.Module):
    def setup(self):
        self.count = self.variable('state', 'count', lambda: jnp.zeros((), jnp.float32))
    def __call__(self, x):
        self.count.value = self.count.value + 1.0
        x = x + 0.1 * self.count.value
        return x

Vmapped2 = nn.vmap(
    Custom1,
    variable_axes={'params': 0, 'state': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
    out_axes=0,
)

Jitted3 = nn.jit(Vmapped2)

def make_model():
    return Jitted3()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
