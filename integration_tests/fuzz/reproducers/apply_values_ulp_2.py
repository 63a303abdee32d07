"""Fuzz reproducer apply_values_ulp_2: apply / values-ulp, in JAX's 64-bit mode.

First seen:
    [apply] values-ulp: [0]: max |diff| 2.72e-13

Found by `python -m integration_tests.fuzz` under `JAX_ENABLE_X64=1` (seed x64b,
program 462), shrunk: attention over float64 inputs (a float64 parameter made by
`nn.initializers.normal` in 64-bit mode) with a head depth of 2, whose square root is
inexact. linen's eager path scaled the queries by a float32 root, Flax by a float64 one
(fixed: F29). `X64 = True` runs it in that mode (the suite runs in JAX's default one).
`python integration_tests/fuzz/reproducers/apply_values_ulp_2.py` prints the differences
between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'apply/values-ulp/container.compact+custom.compact+custom.param+layer.CrossKV'
STAGE = 'apply'
KIND = 'values-ulp'
SETTINGS = {'jax_enable_x64': True}
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed x64b, program 462).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Custom2(nn.Module):
    @nn.compact
    def __call__(self, x):
        w = self.param('w', nn.initializers.normal(0.5), (FEATURES,))
        x = x * jnp.broadcast_to(w, x.shape)
        return x

class CrossKV3(nn.Module):
    @nn.compact
    def __call__(self, x):
        k = nn.Dense(FEATURES)(x)
        attention = nn.MultiHeadDotProductAttention(
            num_heads=2, qkv_features=4, out_features=FEATURES, deterministic=True
        )
        return attention(x, k, jnp.flip(x, axis=-2))

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Custom2()(x)
        x = CrossKV3()(x)
        return x

def make_model():
    return Block1()
"""


if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND, settings=SETTINGS))
