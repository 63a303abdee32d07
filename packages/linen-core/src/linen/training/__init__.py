"""linen.training: what a Flax training loop imports from ``flax.training``.

``TrainState`` bundles the step count, the apply function, the parameters, an
optax transformation and its state in one pytree, so a jitted train step takes and
returns a single value. It needs optax only to build the optimizer you pass in;
``pip install "linen-core[training]"`` brings it.
"""

from __future__ import annotations

from linen.training import train_state as train_state
from linen.training.train_state import TrainState as TrainState

__all__ = [
    'TrainState',
    'train_state',
]
