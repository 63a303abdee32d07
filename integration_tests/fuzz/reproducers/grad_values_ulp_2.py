"""Fuzz reproducer grad_values_ulp_2: grad / values-ulp.

First seen:
    [grad] values-ulp: /params/layers_0/a/sub/LayerNorm_0/scale: max |diff| 1.19e-07

Found by `nox -s fuzz` (seed 5512, program 295), shrunk. `python integration_tests/fuzz/reproducers/grad_values_ulp_2.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'grad/values-ulp/adopt.compact+container.compact+layer.Dense+layer.LayerNorm+lift.grad+lift.vmap'
STAGE = 'grad'
KIND = 'values-ulp'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 5512, program 295).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Grad2(nn.Module):
    @nn.compact
    def __call__(self, x):
        body = nn.LayerNorm()
        def fn(mdl, x):
            y = mdl(x)
            return jnp.sum(y * y), y
        (gx,), y = nn.grad(fn, body, x, has_aux=True)
        return y + 0.5 * gx

class Wrap3(nn.Module):
    sub: nn.Module
    @nn.compact
    def __call__(self, x):
        return self.sub(x)

class Adopt4(nn.Module):
    @nn.compact
    def __call__(self, x):
        shared = Grad2()
        x = Wrap3(sub=shared)(x)
        return Wrap3(sub=shared)(x)

Vmapped5 = nn.vmap(
    Adopt4,
    variable_axes={'params': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
    out_axes=0,
)

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(FEATURES)(x)
        x = Vmapped5()(x)
        return x

def make_model():
    return Block1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
