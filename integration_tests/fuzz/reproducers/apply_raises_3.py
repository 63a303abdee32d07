"""Fuzz reproducer apply_raises_3: apply / raises.

First seen:
    [apply] raises: only linen raises ScopeCollectionNotFound: Tried to access "scale" from collection "params" in "/c1/ScanCell3_0/Mapped2_0/Map_variablesLayerNorm_0" but the collection is empty. Pass the "params" collection returned by `init` to `apply`, or make it mutable with `mutable=["params"]` so it can be created.

Found by `nox -s fuzz` (seed ls37-old-1, program 220), shrunk. `python integration_tests/fuzz/reproducers/apply_raises_3.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = (
    'apply/raises/layer.LayerNorm+lift.map_variables+lift.map_variables.init_always=True+lift.scan'
)
STAGE = 'apply'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ls37-old-1, program 220).
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
            nn.LayerNorm, 'params', trans_in_fn=lambda vs: vs,
            trans_out_fn=lambda vs: vs, init=True, mutable=False,
        )
        return mapped()(x)

class Cell2(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        h = Mapped1()(c + x)
        return h, h

Scanned3 = nn.scan(
    Cell2,
    variable_axes={'params': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
)

class Scan4(nn.Module):
    @nn.compact
    def __call__(self, x):
        c, ys = Scanned3()(jnp.zeros(x.shape[1:], x.dtype), x)
        return ys

def make_model():
    return Scan4()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
