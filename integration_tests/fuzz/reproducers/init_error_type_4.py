"""Fuzz reproducer init_error_type_4: init / error-type.

First seen:
    [init] error-type: Flax NameInUseError, linen AutoregressiveCacheShapeError: MultiHeadDotProductAttention at "/Adopt7_0/Decode5_0/MultiHeadDotProductAttention_0": autoregressive cache shape error, expected query shape (1, 1, 4) instead got (2, 1, 4). In decode mode, init with

Found by `nox -s fuzz` (seed ci, program 28), shrunk. `python integration_tests/fuzz/reproducers/init_error_type_4.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'init/error-type/adopt.compact+container.compact+custom.compact+custom.rng+layer.DecodeAttention+share_scope'
STAGE = 'init'
KIND = 'error-type'
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed ci, program 28).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True

class Custom2(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = x + 0.1 * jax.random.normal(self.make_rng('noise'), x.shape)
        return x

class Shared3(nn.Module):
    def setup(self):
        self.inner = Custom2()
        nn.share_scope(self, self.inner)
    def __call__(self, x):
        return self.inner(x)

class Shared4(nn.Module):
    def setup(self):
        self.inner = Shared3()
        nn.share_scope(self, self.inner)
    def __call__(self, x):
        return self.inner(x)

class Decode5(nn.Module):
    @nn.compact
    def __call__(self, x):
        attention = nn.MultiHeadDotProductAttention(
            num_heads=1, qkv_features=4, out_features=FEATURES, decode=True, deterministic=True
        )
        if self.is_initializing():
            return attention(x)
        steps = [attention(x[..., i : i + 1, :]) for i in range(x.shape[-2])]
        return jnp.concatenate(steps, axis=-2)

class Wrap6(nn.Module):
    sub: nn.Module
    @nn.compact
    def __call__(self, x):
        return self.sub(x)

class Adopt7(nn.Module):
    @nn.compact
    def __call__(self, x):
        shared = Decode5()
        x = Wrap6(sub=shared)(x)
        return Wrap6(sub=shared)(x)

class Block1(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Shared4()(x)
        x = Adopt7()(x)
        return x

def make_model():
    return Block1()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND))
