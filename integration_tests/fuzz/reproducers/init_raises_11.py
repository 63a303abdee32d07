"""Fuzz reproducer init_raises_11: init / raises.

First seen:
    [init] raises: only Flax raises TypeError: Custom VJP bwd rule must produce an output with the same container (pytree) structure as the args tuple of the primal function, and in particular must produce a tuple of length equal to the number of arguments to the primal function, but got bwd output structure PyTreeDef((({'params': {'w': *}},), *

Found by `nox -s fuzz` (seed 5803, program 669), shrunk. `python integration_tests/fuzz/reproducers/init_raises_11.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/raises/custom.param+custom.setup+lift.custom_vjp+lift.grad'
STAGE = 'init'
KIND = 'raises'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 5803, program 669).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True
CLONE = False
PENALTY = False

class Custom3(nn.Module):
    def setup(self):
        self.w = self.param('w', nn.initializers.normal(0.5), (FEATURES,))
    def __call__(self, x):
        x = x * jnp.broadcast_to(self.w, x.shape)
        return x

class CustomVjp2(nn.Module):
    @nn.compact
    def __call__(self, x):
        body = Custom3()
        def fn(mdl, x):
            return mdl(x)
        def fwd(mdl, x):
            return nn.vjp(fn, mdl, x)
        def bwd(vjp_fn, t):
            grads, gx = vjp_fn(t)
            return grads, gx
        return nn.custom_vjp(fn, forward_fn=fwd, backward_fn=bwd)(body, x)

class Grad1(nn.Module):
    @nn.compact
    def __call__(self, x):
        body = CustomVjp2()
        def fn(mdl, x):
            y = mdl(x)
            return jnp.sum(y * y), y
        (gx,), y = nn.grad(fn, body, x, has_aux=True)
        return y + 0.5 * gx

def make_model():
    return Grad1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
