"""Activation functions and the ``PReLU`` layer, as ``flax.linen`` names them.

The functions are ``jax.nn``'s own (``tanh`` is ``jnp.tanh``), so
``nn.relu is jax.nn.relu`` holds as it does in Flax. ``PReLU`` is the one
activation with a learned parameter.
"""

from __future__ import annotations

from jax.nn import celu as celu
from jax.nn import elu as elu
from jax.nn import gelu as gelu
from jax.nn import glu as glu
from jax.nn import hard_sigmoid as hard_sigmoid
from jax.nn import hard_silu as hard_silu
from jax.nn import hard_swish as hard_swish
from jax.nn import hard_tanh as hard_tanh
from jax.nn import leaky_relu as leaky_relu
from jax.nn import log_sigmoid as log_sigmoid
from jax.nn import log_softmax as log_softmax
from jax.nn import logsumexp as logsumexp
from jax.nn import one_hot as one_hot
from jax.nn import relu as relu
from jax.nn import relu6 as relu6
from jax.nn import selu as selu
from jax.nn import sigmoid as sigmoid
from jax.nn import silu as silu
from jax.nn import soft_sign as soft_sign
from jax.nn import softmax as softmax
from jax.nn import softplus as softplus
from jax.nn import standardize as standardize
from jax.nn import swish as swish
from jax.numpy import tanh as tanh

from linen.layers._activation import PReLU as PReLU
from linen.layers._exports import NAMES
from linen.layers._typing import Array as Array
from linen.layers._typing import Dtype as Dtype
from linen.module import Module as Module
from linen.module import compact as compact

# Some imports above are not in `__all__`: the names flax.linen.activation has through its
# own imports (typing aliases, `Module`, `compact`, ...), kept for Flax code that
# reaches them through this module (`flax.linen.activation.compact`).
# The public names are listed once, in the package's name table.
__all__ = list(NAMES.defined_in('.activation'))

# `jax.nn.normalize` was the old name of `standardize`; Flax still exports it.
normalize = standardize


def __getattr__(name: str):
    # flax.linen.activation also has `Dense`; imported on first use, so that an
    # activation function does not load the linear layers.
    if name == 'Dense':
        from linen.layers._linear import Dense

        return Dense
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
