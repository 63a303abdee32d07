"""``BatchApply``, as ``flax.linen.batch_apply``.

The public path Flax code imports through (``nn.batch_apply.X``); the implementation lives
in the private modules named below.
"""

from __future__ import annotations

from linen.layers._batch_apply import BatchApply as BatchApply

__all__ = [
    'BatchApply',
]
