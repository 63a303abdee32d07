"""A whole generated program: its root node, the rank of its input, and its source.

The source imports ``flax.linen as nn`` (the runner swaps that one line for
linen), defines the classes the grammar rendered, and ends with ``make_model()``;
the module-level constants tell the runner the input shape, whether the root
has a second method (``HEAD``) and how to name it in ``apply(method=...)``, and which
optional stages run (``CLONE``, ``PENALTY``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, replace

from integration_tests.fuzz.grammar import (
    FEATURE_DIM,
    FLAX_IMPORT,
    Container,
    Ctx,
    Node,
    Source,
)


@dataclass(frozen=True)
class Program:
    """A whole generated program: a root node and the rank of its input."""

    root: Node
    rank: int
    seed: str = ''
    method_by_name: bool = True  # apply(method='head'), else method=Class.head
    clone: bool = False  # the runner's clone stage: init and apply clones of the root
    penalty: bool = False  # the runner's penalty stage: a gradient of an input gradient

    def input_shape(self) -> tuple[int, ...]:
        return (2,) * (self.rank - 1) + (FEATURE_DIM,)

    def has_head(self) -> bool:
        return isinstance(self.root, Container) and self.root.head and self.root.style == 'setup'

    def features(self) -> set[str]:
        out = self.root.features() | {f'rank.{self.rank}'}
        out |= {'stage.clone'} if self.clone else set()
        return out | {'stage.penalty'} if self.penalty else out

    def size(self) -> int:
        return self.root.size()

    def source(self) -> str:
        src = Source()
        ctor = self.root.render(src)
        header = [
            f'# A generated Linen program (integration_tests/fuzz, {self.seed or "shrunk"}).',
            'import jax',
            'import jax.numpy as jnp',
            FLAX_IMPORT,
            '',
            f'FEATURES = {FEATURE_DIM}',
            f'INPUT_SHAPE = {self.input_shape()!r}',
            f'HEAD = {self.has_head()!r}',
            f'METHOD_BY_NAME = {self.method_by_name!r}',
            f'CLONE = {self.clone!r}',
            f'PENALTY = {self.penalty!r}',
        ]
        footer = ['def make_model():', f'    return {ctor.call()}']
        return '\n\n'.join(['\n'.join(header), *src.classes, '\n'.join(footer)]) + '\n'

    def shrinks(self) -> Iterator[Program]:
        if not self.method_by_name:
            yield replace(self, method_by_name=True)
        if self.clone:
            yield replace(self, clone=False)
        if self.penalty:
            yield replace(self, penalty=False)
        if self.rank > self.root.min_rank():
            yield replace(self, rank=self.rank - 1)
        for node in self.root.shrinks():
            if node.min_rank() <= self.rank:
                yield replace(self, root=node)


def draw_program(rng: random.Random, seed: str = '') -> Program:
    rank = rng.choice([1, 2, 2, 3, 3])
    ctx = Ctx(rank=rank)
    head = rng.random() < 0.3
    root = Container.draw(rng, ctx, head=head)
    by_name = not head or rng.random() < 0.5
    clone = rng.random() < 0.3
    penalty = rng.random() < 0.2  # drawn last: the earlier draws stay each seed's
    return Program(root, max(rank, root.min_rank()), seed, by_name, clone, penalty)


__all__ = ['Program', 'draw_program']
