"""Fuzz reproducer init_raises_9: init / raises.

First seen:
    [init] raises: only Flax raises KeyReuseError: Previously-consumed key passed to jit-compiled function at index 2
    See https://docs.jax.dev/en/latest/errors.html#jax.errors.KeyReuseError

Found by `nox -s fuzz` (seed 5305, program 260), shrunk. `python integration_tests/fuzz/reproducers/init_raises_9.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/layer.BatchNorm+lift.cond+lift.vmap'
STAGE = 'init'
KIND = 'raises'
SETTINGS = {'jax_debug_key_reuse': True}
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 5305, program 260).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Cond1(nn.Module):
    @nn.compact
    def __call__(self, x):
        def on_true(mdl, x):
            return nn.BatchNorm(use_running_average=False, momentum=0.8, name='branch')(x)
        def on_false(mdl, x):
            return -nn.BatchNorm(use_running_average=False, momentum=0.8, name='branch')(x)
        return nn.cond(jnp.sum(x) > 0, on_true, on_false, self, x)

Vmapped2 = nn.vmap(
    Cond1,
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

    sys.exit(main(SOURCE, STAGE, KIND, settings=SETTINGS))
