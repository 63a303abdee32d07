"""The type aliases ``flax.linen.module`` carries (``flax.typing``'s).

Flax code imports them through that module (``from flax.linen.module import
PRNGKey, VariableDict``), so ``linen.module`` offers them too, besides its ``__all__``:
``linen.core.typing``'s, plus the interceptor's. Annotations only: nothing in linen
checks a value against them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from linen.core.scope import PRNGSequenceFilter as PRNGSequenceFilter
from linen.core.typing import FrozenVariableDict as FrozenVariableDict
from linen.core.typing import MutableVariableDict as MutableVariableDict
from linen.core.typing import PRNGKey as PRNGKey
from linen.core.typing import RNGSequences as RNGSequences
from linen.core.typing import VariableDict as VariableDict

Args = tuple[Any]
Kwargs = dict[str, Any]
# An interceptor of `nn.intercept_methods`: (next_fun, args, kwargs, context) -> result.
Interceptor = Callable[[Callable[..., Any], Args, Kwargs, Any], Any]
