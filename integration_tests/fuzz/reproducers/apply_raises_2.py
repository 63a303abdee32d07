"""Fuzz reproducer apply_raises_2: apply / raises.

First seen:
    [apply] raises: only linen raises ScopeCollectionNotFound: Tried to access "kernel" from collection "params" in "/blocks_b0/VmapVCell4_0/Mapped3_0/Map_variablesVmapDense_0" but the collection is empty. Pass the "params" collection returned by `init` to `apply`, or make it mutable with `mutable=["params"]` so it can be created.

Found by `nox -s fuzz` (seed g1, program 913), shrunk. `python integration_tests/fuzz/reproducers/apply_raises_2.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'apply/raises/layer.Dense+lift.map_variables+lift.map_variables.init_always=True+lift.vmap'
STAGE = 'apply'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed g1, program 913).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Mapped1(nn.Module):
    @nn.compact
    def __call__(self, x):
        mapped = nn.map_variables(
            nn.Dense, 'params', trans_in_fn=lambda vs: vs,
            trans_out_fn=lambda vs: vs, init=True, mutable=False,
        )
        return mapped(FEATURES)(x)

Vmapped2 = nn.vmap(
    Mapped1,
    variable_axes={'params': 0},
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
