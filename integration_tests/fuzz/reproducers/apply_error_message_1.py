"""Fuzz reproducer apply_error_message_1: apply / error-message.

First seen:
    [apply] error-message: Flax 'Tried to access "kernel" from collection "params" in "/c0/body/remat(map_variables(Map_variablesCheckpointDense_0))" but the collection is empty', linen 'Tried to access "kernel" from collection "params" in "/c0/body/Map_variablesCheckpointDense_0" but the collection is empty. Pass the "params" collection returned by `init` to `apply`, or make it mutab'

Found by `nox -s fuzz` (seed s2, program 47), shrunk. `python integration_tests/fuzz/reproducers/apply_error_message_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'apply/error-message/layer.Dense+lift.map_variables+lift.map_variables.init_always=True'
STAGE = 'apply'
KIND = 'error-message'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed s2, program 47).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
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

def make_model():
    return Mapped1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
