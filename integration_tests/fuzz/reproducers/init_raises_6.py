"""Fuzz reproducer init_raises_6: init / raises.

First seen:
    [init] raises: only linen raises UnexpectedTracerError: Encountered an unexpected tracer. A function transformed by JAX had a side effect, allowing for a reference to an intermediate value with type float32[3] wrapped in a DynamicJaxprTracer to escape the scope of the transformation.
    JAX transformations require that functions explicitly return their outp

Found by `nox -s fuzz` (seed fd, program 479), shrunk. `python integration_tests/fuzz/reproducers/init_raises_6.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/children.fdict+container.compact+layer.Dense+lift.jit'
STAGE = 'init'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed fd, program 479).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Block2(nn.Module):
    subs: dict
    @nn.compact
    def __call__(self, x):
        x = self.subs['k0'](x)
        return x

Jitted3 = nn.jit(Block2)

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Jitted3(subs={'k0': nn.Dense(FEATURES)})(x)
        return x

def make_model():
    return Block1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
