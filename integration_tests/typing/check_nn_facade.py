"""Type-checked by pyright in ``nox -s lint`` (never run): the lazy ``linen.nn`` facade
gives IDEs real signatures through its stub, so misuse is a type error."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import linen.nn as nn
from linen.core.errors import InvalidCheckpointError, PluginWarning
from linen.layers.errors import QkvFeaturesNotDivisibleError, RNNInputShapeError


class MLP(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.Dense(self.features, use_bias=True)(x)
        x = nn.relu(x)
        return nn.LayerNorm(epsilon=1e-5)(x)


def build() -> tuple[nn.Module, type[nn.Module]]:
    dense: nn.Dense = nn.Dense(features=3)
    features: int = dense.features
    del features
    return MLP(4), nn.Conv


def variables() -> object:
    return MLP(4).init(jax.random.key(0), jnp.ones((1, 3)))


ERRORS: tuple[type[Exception], ...] = (
    InvalidCheckpointError,
    QkvFeaturesNotDivisibleError,
    RNNInputShapeError,
)
WARNING: type[Warning] = PluginWarning


def named() -> nn.Module:
    return nn.Dense(3, name='head', parent=None)
