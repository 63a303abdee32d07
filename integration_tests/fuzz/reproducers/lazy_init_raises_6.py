"""Fuzz reproducer lazy_init_raises_6: lazy_init / raises.

First seen:
    [lazy_init] raises: only linen raises TypeError: cond branch outputs must have the same pytree structure, but they differ:

    true_fun is run at /work/main/packages/linen-transforms/src/linen/transforms/_control.py:22
    false_fun is run at /work/main/packages/linen-transforms/src/linen/transforms/_control.py:22

    true_fun output at path [1][0][0]['para

Found by `nox -s fuzz` (seed 5308, program 667), shrunk. `python integration_tests/fuzz/reproducers/lazy_init_raises_6.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'lazy_init/raises/layer.Dense+layer.EmbedArgmax+lift.cond+lift.cond.other'
STAGE = 'lazy_init'
KIND = 'raises'
SETTINGS = {'jax_disable_jit': True}
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 5308, program 667).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (3,)
HEAD = False
METHOD_BY_NAME = True
CLONE = False

class EmbedArgmax1(nn.Module):
    @nn.compact
    def __call__(self, x):
        embed = nn.Embed(num_embeddings=FEATURES, features=FEATURES)
        ids = jnp.argmax(x, axis=-1)
        return embed.attend(embed(ids) + x)

class Cond2(nn.Module):
    @nn.compact
    def __call__(self, x):
        def on_true(mdl, x):
            return nn.Dense(FEATURES, name='branch')(x)
        def on_false(mdl, x):
            return -EmbedArgmax1(name='branch')(x)
        return nn.cond(jnp.sum(x) > 0, on_true, on_false, self, x)

def make_model():
    return Cond2()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND, settings=SETTINGS))
