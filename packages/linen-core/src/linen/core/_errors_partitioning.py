"""Errors of partitioning metadata and logical axis rules.

Public as :mod:`linen.core.errors`, which re-exports every class.
"""

from __future__ import annotations

from linen.core._errors_base import LinenError


class PartitioningUnspecifiedError(LinenError):
    """A transform needs ``metadata_params={PARTITION_NAME: ...}`` for boxed parameters."""

    def __init__(self, target=None):
        super().__init__(
            'Trying to transform a Partitioned variable but "partition_name" is not '
            'specified in metadata_params: pass `metadata_params={nn.PARTITION_NAME: "axis_name"}` to '
            'the lifted transform.'
        )


class LogicalAxisRulesError(LinenError, ValueError):
    """Logical axis names, rules and mesh do not fit together.

    Raised in strict mode (``logical_axis_rules(rules, strict=True)``, the flag
    ``linen_strict_logical_rules`` or ``LINEN_STRICT_LOGICAL_RULES=1``) and, as in
    Flax, always for a logical name used twice in one array and for a mesh axis the
    mesh lacks (Flax's message text first). Rules are checked where they are applied
    to a parameter, so the message names the parameter path (where known) and the
    axis.

    >>> with nn.logical_axis_rules([('embed', 'model')], strict=True):
    ...     nn.logical_to_mesh_axes(('embed', 'mlp'))  # 'mlp' has no rule
    Traceback (most recent call last):
    ...
    LogicalAxisRulesError: ...
    """

    def __init__(self, message: str):
        super().__init__(message)
