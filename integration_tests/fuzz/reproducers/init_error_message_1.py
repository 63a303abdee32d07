"""Fuzz reproducer init_error_message_1: init / error-message.

First seen:
    [init] error-message: Flax 'Tried to access "scale" from collection "params" in "/while_loop(c0)/remat(body)/map_variables(Map_variablesBatchNorm_0)" but the collection is empty', linen 'Tried to access "scale" from collection "params" in "/c0/body/Map_variablesBatchNorm_0" but the collection is empty. Pass the "params" collection returned by `init` to `apply`, or make it mutable with'

Found by `nox -s fuzz` (seed s3, program 19), shrunk. `python integration_tests/fuzz/reproducers/init_error_message_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/error-message/layer.BatchNorm+lift.map_variables+lift.while_loop'
STAGE = 'init'
KIND = 'error-message'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed s3, program 19).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class Mapped1(nn.Module):
    @nn.compact
    def __call__(self, x):
        mapped = nn.map_variables(
            nn.BatchNorm, 'params', trans_in_fn=lambda vs: vs,
            trans_out_fn=lambda vs: vs, init=self.is_initializing(), mutable=False,
        )
        return mapped(use_running_average=False, momentum=0.8)(x)

class Loop2(nn.Module):
    def setup(self):
        self.body = Mapped1()
    def __call__(self, x):
        x = self.body(x)
        def cond_fn(mdl, c):
            return c[0] < 2
        def body_fn(mdl, c):
            return c[0] + 1, mdl.body(c[1])
        _, x = nn.while_loop(
            cond_fn, body_fn, self, (jnp.array(0), x),
            carry_variables=['batch_stats'], broadcast_variables='params',
            split_rngs={'params': False, 'dropout': True, 'noise': True},
        )
        return x

def make_model():
    return Loop2()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
