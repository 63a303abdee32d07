"""Build every peer's models once, check they agree, and hold what the measures need."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from benchmarks._impl import Impl
from benchmarks._peers import PEERS, Peer, param_count, short_reason
from benchmarks._sizes import Sizes

MODELS = ('mlp', 'transformer', 'tiny', 'scan', 'unrolled')

# Peers whose failures are the harness's own bugs and must not be hidden; only a
# missing install turns them into an "unavailable" column. linen is being written
# alongside this harness, so anything it raises becomes an "unavailable" cell.
_UNDER_DEVELOPMENT = frozenset({'linen', 'linen_reuse'})


class ParamCountMismatch(AssertionError):
    """A model's parameter count differs from the pure JAX model's."""


def model_inputs(sizes: Sizes) -> dict[str, jax.Array]:
    """One input per model; random so that normalisation and softmax see real data."""
    s = sizes
    shapes = {
        'mlp': (s.mlp_batch, s.mlp_width),
        'transformer': (s.tf_batch, s.tf_seq, s.tf_width),
        'tiny': (s.tiny_batch, s.tiny_width),
        'scan': (s.res_batch, s.res_width),
        'unrolled': (s.res_batch, s.res_width),
    }
    keys = jax.random.split(jax.random.key(42), len(shapes))
    return {m: jax.random.normal(k, shape) for (m, shape), k in zip(shapes.items(), keys)}


@dataclasses.dataclass
class Bench:
    """Everything the measures share.

    Attributes:
        sizes: model shapes.
        peers: the peers in column order (all of them, available or not).
        impls: ``impls[peer][model]`` for every model that built and initialised.
        params: ``params[peer][model]``, initialised eagerly with ``key``.
        unavailable: ``unavailable[(peer, model)]`` = reason; ``model`` is ``None`` when
            the whole peer is missing.
        inputs: ``inputs[model]``.
        key: the PRNG key every init uses.
    """

    sizes: Sizes
    peers: tuple[Peer, ...]
    impls: dict[str, dict[str, Impl]]
    params: dict[str, dict[str, Any]]
    unavailable: dict[tuple[str, str | None], str]
    inputs: dict[str, jax.Array]
    key: jax.Array

    def available(self, model: str) -> list[str]:
        """Peers (in column order) that have ``model``."""
        return [p.name for p in self.peers if model in self.impls.get(p.name, {})]

    def reason(self, peer: str, model: str) -> str | None:
        """Why ``peer`` has no ``model``, or ``None`` when it has it."""
        return self.unavailable.get((peer, None)) or self.unavailable.get((peer, model))

    def mark_unavailable(self, peer: str, model: str, exc: BaseException) -> None:
        """Record a failure of ``peer`` on ``model`` during a measure (linen only)."""
        if peer not in _UNDER_DEVELOPMENT:
            raise exc
        self.unavailable[(peer, model)] = short_reason(exc)
        self.impls.get(peer, {}).pop(model, None)


def build(sizes: Sizes, peers: tuple[Peer, ...] = PEERS) -> Bench:
    """Build, initialise and cross-check every peer's models.

    Raises:
        ParamCountMismatch: a reference peer's model has a different parameter count
            than the pure JAX one (for linen, the cell says so instead).
    """
    key = jax.random.key(0)
    inputs = model_inputs(sizes)
    impls: dict[str, dict[str, Impl]] = {}
    params: dict[str, dict[str, Any]] = {}
    unavailable: dict[tuple[str, str | None], str] = {}
    reference_counts: dict[str, int] = {}
    reference_shapes: dict[str, tuple[int, ...]] = {}
    for peer in peers:
        try:
            built = peer.build(sizes)
        except ImportError as exc:
            unavailable[(peer.name, None)] = short_reason(exc)
            continue
        except Exception as exc:
            if peer.name not in _UNDER_DEVELOPMENT:
                raise
            unavailable[(peer.name, None)] = short_reason(exc)
            continue
        impls[peer.name] = {}
        params[peer.name] = {}
        for model in MODELS:
            try:
                p = jax.block_until_ready(built[model].init(key, inputs[model]))
                y = jax.block_until_ready(built[model].apply(p, inputs[model]))
                count = param_count(p)
                if peer.name == 'jax':
                    reference_counts[model] = count
                    reference_shapes[model] = y.shape
                elif count != reference_counts.get(model, count):
                    raise ParamCountMismatch(
                        f'{peer.name} {model}: {count} parameters, pure JAX has '
                        f'{reference_counts[model]}; the models are not equivalent'
                    )
                elif y.shape != reference_shapes.get(model, y.shape):
                    raise ParamCountMismatch(
                        f'{peer.name} {model}: output shape {y.shape}, pure JAX gives '
                        f'{reference_shapes[model]}'
                    )
            except Exception as exc:
                if peer.name not in _UNDER_DEVELOPMENT:
                    raise
                unavailable[(peer.name, model)] = short_reason(exc)
                continue
            impls[peer.name][model] = built[model]
            params[peer.name][model] = p
    return Bench(sizes, peers, impls, params, unavailable, inputs, key)
