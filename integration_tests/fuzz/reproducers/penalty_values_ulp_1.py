"""Fuzz reproducer penalty_values_ulp_1: penalty / values-ulp.

First seen:
    [penalty] values-ulp: /Block2_0/Adopt4_0/LayerNorm_0/scale: max |diff| 9.92e-14

Found by `nox -s fuzz` (seed q12, program 117), shrunk. `python integration_tests/fuzz/reproducers/penalty_values_ulp_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'penalty/values-ulp/adopt.compact+combine.penalty+combine.residual+container.compact+custom.compact+custom.query+layer.LayerNorm+stage.penalty'
STAGE = 'penalty'
KIND = 'values-ulp'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed q12, program 117).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True
CLONE = False
PENALTY = True

class Wrap3(nn.Module):
    sub: nn.Module
    @nn.compact
    def __call__(self, x):
        return self.sub(x)

class Adopt4(nn.Module):
    @nn.compact
    def __call__(self, x):
        shared = nn.LayerNorm()
        x = Wrap3(sub=shared)(x)
        return Wrap3(sub=shared)(x)

class Custom5(nn.Module):
    @nn.compact
    def __call__(self, x):
        flags = (self.has_rng('noise'), self.has_rng('dropout'), self.is_mutable_collection('state'), self.is_mutable_collection('intermediates'), self.has_variable('state', 'count'), self.has_variable('params', 'w'), self.is_initializing())
        x = x + sum(0.5**i for i, flag in enumerate(flags) if flag)
        return x

class Block2(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = x + Adopt4()(x)
        m1 = Custom5()
        x = m1(x) + 0.125 * jax.grad(lambda v: jnp.sum(m1(v) ** 2))(x)
        return x

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = x + Block2()(x)
        return x

def make_model():
    return Block1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
