"""Fuzz reproducer eval_shape_raises_1: eval_shape / raises.

First seen:
    [eval_shape] raises: only linen raises Exception: Leaked trace DynamicJaxprTrace. Leaked tracer(s):

    JitTracer(float32[2,3])
    The error occurred while tracing the function <lambda> at /work/main/integration_tests/fuzz/runner.py:98 for jit. This concrete value was not available in Python because it depends on the value of the argument x.
    <DynamicJaxp

Found by `nox -s fuzz` (seed 5301, program 33), shrunk by hand. `python integration_tests/fuzz/reproducers/eval_shape_raises_1.py` prints the
differences between Flax and linen and exits 1 while this one remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'eval_shape/raises/layer.SpectralNorm'
STAGE = 'eval_shape'
KIND = 'raises'
SETTINGS = {'jax_check_tracer_leaks': True}
SOURCE = """\
# A generated Linen program (integration_tests/fuzz, seed 5301, program 33).
import jax
import jax.numpy as jnp
import flax.linen as nn

FEATURES = 3
INPUT_SHAPE = (2, 3)
HEAD = False
METHOD_BY_NAME = True
CLONE = True

class Spectral3(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.SpectralNorm(nn.Dense(FEATURES))(x, update_stats=True)

def make_model():
    return Spectral3()
"""

if __name__ == '__main__':
    from integration_tests.fuzz.reproduce import main

    sys.exit(main(SOURCE, STAGE, KIND, settings=SETTINGS))
