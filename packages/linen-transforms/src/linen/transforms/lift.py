"""The functional lift API: transforms of ``fn(scope, *args)`` (as ``flax.core.lift``).

>>> from linen.core import init
>>> from linen.transforms import lift
>>> import jax, jax.numpy as jnp
>>> def dense(scope, x):
...     w = scope.param('w', jax.nn.initializers.ones, (x.shape[-1], 2))
...     return x @ w
>>> def model(scope, xs):
...     stacked = lift.vmap(dense, variable_axes={'params': 0}, split_rngs={'params': True})
...     return stacked(scope.push('dense'), xs)
>>> y, variables = init(model)(jax.random.key(0), jnp.ones((3, 4)))
>>> variables['params']['dense']['w'].shape
(3, 4, 2)
"""

from __future__ import annotations

from linen.transforms._autodiff import custom_vjp as custom_vjp
from linen.transforms._autodiff import grad as grad
from linen.transforms._autodiff import jvp as jvp
from linen.transforms._autodiff import value_and_grad as value_and_grad
from linen.transforms._autodiff import vjp as vjp
from linen.transforms._axis_markers import In as In
from linen.transforms._axis_markers import Out as Out
from linen.transforms._control import cond as cond
from linen.transforms._control import switch as switch
from linen.transforms._control import while_loop as while_loop
from linen.transforms._core_checkpoint import checkpoint as checkpoint
from linen.transforms._core_checkpoint import remat as remat
from linen.transforms._core_jit import jit as jit
from linen.transforms._exports import LIFTED
from linen.transforms._remat import remat_scan as remat_scan
from linen.transforms._scan import broadcast as broadcast
from linen.transforms._scan import scan as scan
from linen.transforms._variables import add_metadata_axis as add_metadata_axis
from linen.transforms._variables import fold_rngs as fold_rngs
from linen.transforms._variables import map_variables as map_variables
from linen.transforms._vmap import vmap as vmap

__all__ = ['In', 'Out', *LIFTED]
