"""Errors of the lifted transforms.

Public as :mod:`linen.core.errors`, which re-exports every class.
"""

from __future__ import annotations

from linen.core._errors_base import LinenError


class TransformTargetError(LinenError, TypeError):
    """A lifted transform is applied to something that is neither a Module class nor a method."""

    def __init__(self, target):
        super().__init__(
            'Linen transformations must be applied to Modules classes or functions taking '
            'a Module instance as the first argument. The provided target is not a Module '
            f'class or callable: {target!r}. Linen transforms apply to a Module class or a '
            'Module method; for plain functions use the JAX transform.'
        )


class TransformedMethodReturnValueError(LinenError):
    """A transformed method returned a Module."""

    def __init__(self, name: str):
        super().__init__(
            f'Transformed module method {name} cannot return Modules or Variables. '
            'Their scope ends with the transform: return arrays, and build submodules '
            'outside the transformed method.'
        )
