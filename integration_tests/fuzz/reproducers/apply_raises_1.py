"""Fuzz reproducer apply_raises_1: apply / raises.

First seen:
    [apply] raises: only Flax raises ScopeCollectionNotFound: Tried to access "scale" from collection "params" in "/map_variables(c0)" but the collection is empty. (https://flax.readthedocs.io/en/latest/api_reference/flax.errors.html#flax.errors.ScopeCollectionNotFound)

Found by `nox -s fuzz` (seed 1, program 9), shrunk. `python integration_tests/fuzz/reproducers/apply_raises_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'apply/raises/layer.LayerNorm+lift.map_variables'
STAGE = 'apply'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 1, program 9).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False

Mapped1 = nn.map_variables(
    nn.LayerNorm, 'params', trans_in_fn=lambda vs: vs,
    trans_out_fn=lambda vs: vs, init=True, mutable=True,
)

def make_model():
    return Mapped1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
