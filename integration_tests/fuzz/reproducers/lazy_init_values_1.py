"""Fuzz reproducer lazy_init_values_1: lazy_init / values.

First seen:
    [lazy_init] values: /batch_stats/SpectralNorm_0/Dense_0/kernel/sigma: max |diff| 0.0289

Found by `nox -s fuzz` (ci (program 218)), shrunk. `python integration_tests/fuzz/reproducers/lazy_init_values_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'lazy_init/values/layer.SpectralNorm+lift.vmap'
STAGE = 'lazy_init'
KIND = 'values'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ci, program 218).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Spectral1(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.SpectralNorm(nn.Dense(FEATURES))(x, update_stats=True)

Vmapped2 = nn.vmap(
    Spectral1,
    variable_axes={'params': 0, 'batch_stats': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
    out_axes=0,
)

def make_model():
    return Vmapped2()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
