"""Fuzz reproducer init_raises_2: init / raises.

First seen:
    [init] raises: only linen raises UnexpectedTracerError: Encountered an unexpected tracer. A function transformed by JAX had a side effect, allowing for a reference to an intermediate value with type key<fry>[] wrapped in a DynamicJaxprTracer to escape the scope of the transformation.
    JAX transformations require that functions explicitly return their outp

Found by `nox -s fuzz` (seed ci, program 82), shrunk. `python integration_tests/fuzz/reproducers/init_raises_2.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/children.field+container.setup+layer.Dense+lift.vmap'
STAGE = 'init'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ci, program 82).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True

class Block2(nn.Module):
    sub0: nn.Module
    def setup(self):
        pass
    def __call__(self, x):
        x = self.sub0(x)
        return x

Vmapped3 = nn.vmap(
    Block2,
    variable_axes={'params': 0},
    split_rngs={'params': True, 'dropout': True, 'noise': True},
    in_axes=0,
    out_axes=0,
)

class Block1(nn.Module):
    def setup(self):
        self.c0 = Vmapped3(sub0=nn.Dense(FEATURES))
    def __call__(self, x):
        x = self.c0(x)
        return x

def make_model():
    return Block1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
