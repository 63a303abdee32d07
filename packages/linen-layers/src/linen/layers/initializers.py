"""Parameter initializers: the ``jax.nn.initializers`` set, as ``flax.linen`` has it.

An initializer is a function ``init(key, shape, dtype=jnp.float_) -> Array``.
The ``*_init()`` helpers return the constant initializers, for code that spells
``nn.initializers.zeros_init()`` the way Flax's layers do.

>>> import jax
>>> from linen.layers import initializers
>>> initializers.zeros_init()(jax.random.key(0), (2,))
Array([0., 0.], dtype=float32)
"""

from __future__ import annotations

from jax.nn.initializers import Initializer as Initializer
from jax.nn.initializers import constant as constant
from jax.nn.initializers import delta_orthogonal as delta_orthogonal
from jax.nn.initializers import glorot_normal as glorot_normal
from jax.nn.initializers import glorot_uniform as glorot_uniform
from jax.nn.initializers import he_normal as he_normal
from jax.nn.initializers import he_uniform as he_uniform
from jax.nn.initializers import kaiming_normal as kaiming_normal
from jax.nn.initializers import kaiming_uniform as kaiming_uniform
from jax.nn.initializers import lecun_normal as lecun_normal
from jax.nn.initializers import lecun_uniform as lecun_uniform
from jax.nn.initializers import normal as normal
from jax.nn.initializers import ones as ones
from jax.nn.initializers import orthogonal as orthogonal
from jax.nn.initializers import truncated_normal as truncated_normal
from jax.nn.initializers import uniform as uniform
from jax.nn.initializers import variance_scaling as variance_scaling
from jax.nn.initializers import xavier_normal as xavier_normal
from jax.nn.initializers import xavier_uniform as xavier_uniform
from jax.nn.initializers import zeros as zeros

from linen.layers._initializers import ones_init as ones_init
from linen.layers._initializers import zeros_init as zeros_init

__all__ = [
    'Initializer',
    'constant',
    'delta_orthogonal',
    'glorot_normal',
    'glorot_uniform',
    'he_normal',
    'he_uniform',
    'kaiming_normal',
    'kaiming_uniform',
    'lecun_normal',
    'lecun_uniform',
    'normal',
    'ones',
    'ones_init',
    'orthogonal',
    'truncated_normal',
    'uniform',
    'variance_scaling',
    'xavier_normal',
    'xavier_uniform',
    'zeros',
    'zeros_init',
]
