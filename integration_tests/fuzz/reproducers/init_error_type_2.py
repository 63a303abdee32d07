"""Fuzz reproducer init_error_type_2: init / error-type.

First seen:
    [init] error-type: Flax AssertionError (AssertionError), linen TypeError ('TypeError', 'Exception', 'BaseException', 'object'):  | '_Broadcast' object is not iterable

Found by `nox -s fuzz` (seed ci, program 4, reduced by hand), shrunk. `python integration_tests/fuzz/reproducers/init_error_type_2.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/error-type/scan-broadcast-while_loop'
STAGE = 'init'
KIND = 'error-type'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ci, program 4, reduced by hand).
import jax
import jax.numpy as jnp
import flax.linen as nn
FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
class Loop6(nn.Module):
    def setup(self):
        self.body = nn.LayerNorm()
    def __call__(self, x):
        x = self.body(x)
        def cond_fn(mdl, c):
            return c[0] < 2
        def body_fn(mdl, c):
            return c[0] + 1, mdl.body(c[1])
        _, x = nn.while_loop(
            cond_fn, body_fn, self, (jnp.array(0), x),
            carry_variables=[], broadcast_variables='params',
            split_rngs={'params': False, 'dropout': False, 'noise': False},
        )
        return x
class Cell7(nn.Module):
    def setup(self):
        self.body = Loop6()
    def __call__(self, c, x):
        h = self.body(c + x)
        return h, h
Scanned8 = nn.scan(
    Cell7,
    variable_axes={'params': nn.broadcast},
    split_rngs={'params': False, 'dropout': True, 'noise': True},
    in_axes=0,
)
class Scan9(nn.Module):
    @nn.compact
    def __call__(self, x):
        c, ys = Scanned8()(jnp.zeros(x.shape[1:], x.dtype), x)
        return ys
def make_model():
    return Scan9()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
