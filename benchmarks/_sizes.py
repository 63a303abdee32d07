"""The shapes of every benchmark model, in one place so all libraries agree."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Shapes of the benchmark models.

    Attributes:
        mlp_depth: Dense layers of the deep MLP.
        mlp_width: width (input and hidden) of the deep MLP.
        mlp_batch: batch of the deep MLP's input.
        tf_blocks: pre-LN encoder blocks of the transformer.
        tf_width: model width of the transformer.
        tf_heads: attention heads.
        tf_seq: sequence length.
        tf_batch: batch of the transformer's input.
        tf_hidden: hidden width of each block's feed-forward part.
        tiny_width: width of the 2-layer MLP used for per-call overheads.
        tiny_batch: batch of the tiny MLP's input.
        res_blocks: identical residual blocks, scanned and unrolled.
        res_width: width of the residual blocks.
        res_batch: batch of the residual stack's input.
    """

    mlp_depth: int = 64
    mlp_width: int = 256
    mlp_batch: int = 8
    tf_blocks: int = 12
    tf_width: int = 256
    tf_heads: int = 4
    tf_seq: int = 64
    tf_batch: int = 2
    tf_hidden: int = 1024
    tiny_width: int = 16
    tiny_batch: int = 1
    res_blocks: int = 48
    res_width: int = 256
    res_batch: int = 8


FULL = Sizes()
SMOKE = Sizes(
    mlp_depth=3,
    mlp_width=8,
    mlp_batch=2,
    tf_blocks=2,
    tf_width=16,
    tf_heads=2,
    tf_seq=4,
    tf_batch=1,
    tf_hidden=32,
    tiny_width=4,
    res_blocks=3,
    res_width=8,
    res_batch=2,
)

# LayerNorm epsilon for every library (Flax's default; Haiku and Equinox are told it).
LN_EPSILON = 1e-6
