"""Fuzz reproducer init_raises_10: init / raises.

First seen:
    [init] raises: only Flax raises TracerArrayConversionError: The numpy.ndarray conversion method __array__() was called on traced array with shape float32[3]
    See https://docs.jax.dev/en/latest/101/errors.html#jax.errors.TracerArrayConversionError

Found by `nox -s fuzz` (seed p56c, program 479), shrunk. `python integration_tests/fuzz/reproducers/init_raises_10.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/combine.penalty+container.compact+layer.Dense+lift.custom_vjp'
STAGE = 'init'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed p56c, program 479).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True
CLONE = False
PENALTY = False

class CustomVjp2(nn.Module):
    @nn.compact
    def __call__(self, x):
        body = nn.Dense(FEATURES)
        def fn(mdl, x):
            return mdl(x)
        def fwd(mdl, x):
            return nn.vjp(fn, mdl, x)
        def bwd(vjp_fn, t):
            grads, gx = vjp_fn(t)
            return grads, gx
        return nn.custom_vjp(fn, forward_fn=fwd, backward_fn=bwd)(body, x)

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        m0 = CustomVjp2()
        x = m0(x) + 0.125 * jax.grad(lambda v: jnp.sum(m0(v) ** 2))(x)
        return x

def make_model():
    return Block1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
