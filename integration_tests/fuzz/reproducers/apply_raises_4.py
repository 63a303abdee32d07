"""Fuzz reproducer apply_raises_4: apply / raises.

First seen:
    [apply] raises: only linen raises ScopeCollectionNotFound: Tried to access "kernel" from collection "params" in "/Map_variablesDense_0" but the collection is empty. Pass the "params" collection returned by `init` to `apply`, or make it mutable with `mutable=["params"]` so it can be created. Inside a lifted transform the transform must let the module see it

Found by `nox -s fuzz` (seed 5701, program 2350), shrunk. `python integration_tests/fuzz/reproducers/apply_raises_4.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'apply/raises/layer.Dense+lift.map_variables+lift.map_variables.filters=True+lift.map_variables.init_always=True'
STAGE = 'apply'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 5701, program 2350).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True
CLONE = False
PENALTY = False

class Mapped1(nn.Module):
    @nn.compact
    def __call__(self, x):
        mapped = nn.map_variables(
            nn.Dense, 'params', trans_in_fn=lambda vs: vs,
            trans_out_fn=lambda vs: vs, init=True, mutable=False, variables=['params'], rngs=['params'],
        )
        return mapped(FEATURES)(x)

def make_model():
    return Mapped1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
