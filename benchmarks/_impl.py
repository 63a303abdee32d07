"""The common shape every library's model is brought into for measuring."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class Impl(NamedTuple):
    """One model of one library, as a pair of pure functions.

    Attributes:
        init: ``init(key, x) -> params``; ``params`` is a pytree of arrays only.
        apply: ``apply(params, x) -> y``; closes over anything that is not an array.
        lazy_init: ``lazy_init(key, x_shape) -> params`` from a ``jax.ShapeDtypeStruct``
            input, for libraries that have one (Flax, linen); ``None`` elsewhere, where
            the benchmark calls ``init`` on a zero input of that shape (what a user does).
    """

    init: Callable[[Any, Any], Any]
    apply: Callable[[Any, Any], Any]
    lazy_init: Callable[[Any, Any], Any] | None = None
