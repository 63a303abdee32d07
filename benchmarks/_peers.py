"""The peers (columns of the table): how to import each one and build its models."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from benchmarks._impl import Impl
from benchmarks._sizes import Sizes


class Peer(NamedTuple):
    """One column of the table.

    Attributes:
        name: column key (``jax``, ``flax``, ...).
        label: column heading.
        import_stmt: what a user runs to get the library, timed in a fresh process
            after ``import jax``; ``None`` for the pure JAX baseline.
        build: ``build(sizes) -> {model_name: Impl}``; imports the library itself.
    """

    name: str
    label: str
    import_stmt: str | None
    build: Callable[[Sizes], dict[str, Impl]]


def _build_jax(sizes):
    from benchmarks import models_jax

    return models_jax.models(sizes)


def _flax_style_impls(nn: Any, sizes: Sizes) -> dict[str, Impl]:
    from benchmarks.models_flax_style import flax_style_models

    out = {}
    for name, module in flax_style_models(nn, sizes).items():
        # Bind the module now: a loop variable inside the lambdas would see the last one.
        out[name] = Impl(
            lambda key, x, m=module: m.init(key, x),
            lambda params, x, m=module: m.apply(params, x),
            lambda key, x, m=module: m.lazy_init(key, x),
        )
    return out


def _build_flax(sizes):
    import flax.linen

    return _flax_style_impls(flax.linen, sizes)


def _build_linen(sizes):
    nn = importlib.import_module('linen.nn')
    return _flax_style_impls(nn, sizes)


def _build_haiku(sizes):
    from benchmarks import models_haiku

    return models_haiku.models(sizes)


def _build_equinox(sizes):
    from benchmarks import models_equinox

    return models_equinox.models(sizes)


PEERS: tuple[Peer, ...] = (
    Peer('jax', 'pure JAX', None, _build_jax),
    Peer('flax', 'Flax Linen', 'import flax.linen', _build_flax),
    Peer('haiku', 'Haiku', 'import haiku', _build_haiku),
    Peer('equinox', 'Equinox', 'import equinox', _build_equinox),
    # Touching nn.Dense makes the facade load its plugins: discovery is part of the cost.
    Peer('linen', 'linen', 'import linen.nn as nn; nn.Dense', _build_linen),
)

PEER_NAMES = tuple(p.name for p in PEERS)


def param_count(params: Any) -> int:
    """Total number of scalars in a parameter pytree."""
    return sum(int(leaf.size) for leaf in jax.tree_util.tree_leaves(params))


def short_reason(exc: BaseException) -> str:
    """A one-line reason for an 'unavailable' cell."""
    text = f'{type(exc).__name__}: {exc}'.splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 120 else text[:117] + '...'
