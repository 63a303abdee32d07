"""Fuzz reproducer lazy_init_raises_5: lazy_init / raises.

First seen:
    [lazy_init] raises: only linen raises KeyReuseError: Previously-consumed key passed to random_split at index 0
    See https://docs.jax.dev/en/latest/101/errors.html#jax.errors.KeyReuseError

Found by `nox -s fuzz` (seed 5302, program 48), shrunk. `python integration_tests/fuzz/reproducers/lazy_init_raises_5.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'lazy_init/raises/container.compact+layer.Dense+lift.jit+lift.vmap'
STAGE = 'lazy_init'
KIND = 'raises'
SETTINGS = {'jax_debug_key_reuse': True}
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 5302, program 48).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

Jitted2 = nn.jit(nn.Dense)

Vmapped3 = nn.vmap(
    nn.Dense,
    variable_axes={'params': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
    out_axes=0,
)

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Jitted2(FEATURES)(x)
        x = Vmapped3(FEATURES)(x)
        return x

def make_model():
    return Block1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND, settings=SETTINGS))
