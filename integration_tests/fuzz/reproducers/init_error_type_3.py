"""Fuzz reproducer init_error_type_3: init / error-type.

First seen:
    [init] error-type: Flax AssertionError (AssertionError), linen TypeError ('TypeError', 'Exception', 'BaseException', 'object'):  | '_Broadcast' object is not iterable

Found by `nox -s fuzz` (seed ci, program 14), shrunk. `python integration_tests/fuzz/reproducers/init_error_type_3.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/error-type/layer.LayerNorm+lift.scan+lift.scan.params_axis=None'
STAGE = 'init'
KIND = 'error-type'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ci, program 14).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True

class Cell1(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        h = nn.LayerNorm()(c + x)
        return h, h

Scanned2 = nn.scan(
    Cell1,
    variable_axes={'params': nn.broadcast},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
)

class Scan3(nn.Module):
    @nn.compact
    def __call__(self, x):
        c, ys = Scanned2()(jnp.zeros(x.shape[1:], x.dtype), x)
        return ys

def make_model():
    return Scan3()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
