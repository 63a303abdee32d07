"""Errors of checkpoints, ``traverse_util`` and ``TrainState``.

Public as :mod:`linen.core.errors`, which re-exports every class.
"""

from __future__ import annotations

from linen.core._errors_base import LinenError


class InvalidCheckpointError(LinenError, ValueError):
    """Bytes or a state dict that cannot be restored."""

    def __init__(self, msg: str):
        super().__init__(msg)


class TraverseInputTypeError(LinenError, TypeError):
    """A ``traverse_util`` function got something that is not a (Frozen)dict.

    >>> from linen.core import traverse_util
    >>> traverse_util.flatten_dict([1, 2])
    Traceback (most recent call last):
    ...
    TraverseInputTypeError: ...
    """

    def __init__(self, msg: str):
        super().__init__(msg)


class TraversalSetValuesCountError(LinenError, ValueError):
    """``ModelParamTraversal.set`` got more or fewer values than parameters it selects.

    >>> from linen.core.traverse_util import ModelParamTraversal
    >>> ModelParamTraversal(lambda p, _: True).set([], {'w': 1})
    Traceback (most recent call last):
    ...
    TraversalSetValuesCountError: ...
    """

    def __init__(self, msg: str):
        super().__init__(msg)


class TrainStateOptimizerError(LinenError, TypeError, AttributeError):
    """``TrainState.create`` got a ``tx`` that is not an optax-style transformation.

    Also an ``AttributeError``: Flax calls ``tx.init`` and meets the missing attribute.

    >>> from linen.training.train_state import TrainState
    >>> TrainState.create(apply_fn=lambda v, x: x, params={}, tx=0.1)
    Traceback (most recent call last):
    ...
    TrainStateOptimizerError: ...
    """

    def __init__(self, msg: str):
        super().__init__(msg)
