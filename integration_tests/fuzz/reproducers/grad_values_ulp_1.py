"""Fuzz reproducer grad_values_ulp_1: grad / values-ulp.

First seen:
    [grad] values-ulp: /params/ScanCell2_0/CrossKV1_0/Dense_0/bias: max |diff| 4.47e-08

Found by the ls39 family check (`CrossKV` under `nn.scan`; FINDINGS F25), shrunk. `python integration_tests/fuzz/reproducers/grad_values_ulp_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'grad/values-ulp/layer.CrossKV+lift.scan'
STAGE = 'grad'
KIND = 'values-ulp'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, shrunk).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class CrossKV1(nn.Module):
    @nn.compact
    def __call__(self, x):
        k = nn.Dense(FEATURES)(x)
        attention = nn.MultiHeadDotProductAttention(
            num_heads=2, qkv_features=4, out_features=FEATURES, deterministic=True
        )
        return attention(x, k, jnp.flip(x, axis=-2))

class Cell2(nn.Module):
    @nn.compact
    def __call__(self, c, x):
        h = CrossKV1()(c + x)
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
