"""The common shape every library's model is brought into for measuring."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class Impl(NamedTuple):
    """One model of one library, as a pair of pure functions.

    Attributes:
        init: ``init(key, x) -> params``; ``params`` is a pytree of arrays only.
        apply: ``apply(params, x) -> y``; closes over anything that is not an array.
    """

    init: Callable[[Any, Any], Any]
    apply: Callable[[Any, Any], Any]
