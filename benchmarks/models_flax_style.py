"""The Flax Linen model source, shared verbatim by the Flax and the linen columns.

:func:`flax_style_models` is called once with ``flax.linen`` and once with ``linen.nn``:
the only difference between the two columns is the module object passed in.
"""

from __future__ import annotations

from typing import Any

from benchmarks._sizes import Sizes


def flax_style_models(nn: Any, sizes: Sizes) -> dict[str, Any]:
    """Define the benchmark models against the Flax Linen API ``nn``.

    Args:
        nn: ``flax.linen`` or ``linen.nn``.
        sizes: the benchmark shapes.

    Returns:
        ``{model_name: module instance}`` for ``mlp``, ``transformer``, ``tiny``,
        ``scan`` and ``unrolled``.
    """

    class MLP(nn.Module):
        depth: int
        width: int

        @nn.compact
        def __call__(self, x):
            for i in range(self.depth):
                x = nn.Dense(self.width)(x)
                if i < self.depth - 1:
                    x = nn.relu(x)
            return x

    class EncoderBlock(nn.Module):
        width: int
        heads: int
        hidden: int

        @nn.compact
        def __call__(self, x):
            h = nn.LayerNorm()(x)
            h = nn.MultiHeadDotProductAttention(num_heads=self.heads, qkv_features=self.width)(h)
            x = x + h
            h = nn.LayerNorm()(x)
            h = nn.relu(nn.Dense(self.hidden)(h))
            return x + nn.Dense(self.width)(h)

    class Encoder(nn.Module):
        blocks: int
        width: int
        heads: int
        hidden: int

        @nn.compact
        def __call__(self, x):
            for _ in range(self.blocks):
                x = EncoderBlock(self.width, self.heads, self.hidden)(x)
            return nn.LayerNorm()(x)

    class ResBlock(nn.Module):
        width: int

        @nn.compact
        def __call__(self, x):
            h = nn.relu(nn.Dense(self.width)(x))
            return x + nn.Dense(self.width)(h)

    class ScanCell(nn.Module):
        width: int

        @nn.compact
        def __call__(self, x, _):
            return ResBlock(self.width)(x), None

    class Scanned(nn.Module):
        blocks: int
        width: int

        @nn.compact
        def __call__(self, x):
            stack = nn.scan(
                ScanCell,
                variable_axes={'params': 0},
                split_rngs={'params': True},
                length=self.blocks,
            )
            x, _ = stack(self.width, name='blocks')(x, None)
            return x

    class Unrolled(nn.Module):
        blocks: int
        width: int

        @nn.compact
        def __call__(self, x):
            for _ in range(self.blocks):
                x = ResBlock(self.width)(x)
            return x

    s = sizes
    return {
        'mlp': MLP(s.mlp_depth, s.mlp_width),
        'transformer': Encoder(s.tf_blocks, s.tf_width, s.tf_heads, s.tf_hidden),
        'tiny': MLP(2, s.tiny_width),
        'scan': Scanned(s.res_blocks, s.res_width),
        'unrolled': Unrolled(s.res_blocks, s.res_width),
    }


def flax_style_jit_tower(nn: Any, width: int, instances: int) -> Any:
    """A fresh ``Tower`` class: ``instances`` ``nn.jit`` instances of one fresh ``Block``.

    Fresh classes on every call, so a lifted jit's cache of an earlier call cannot
    serve this one. ``Tower(width)`` maps ``(batch, width)`` to the same shape.
    """

    class Block(nn.Module):
        width: int

        @nn.compact
        def __call__(self, x):
            return nn.tanh(nn.Dense(self.width)(x))

    class Tower(nn.Module):
        width: int

        @nn.compact
        def __call__(self, x):
            for _ in range(instances):
                x = nn.jit(Block)(self.width)(x)
            return x

    return Tower(width)
