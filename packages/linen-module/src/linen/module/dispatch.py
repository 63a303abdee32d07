"""The method dispatcher as sibling distributions use it (a public contract of linen-module).

linen-transforms runs a Module method inside a lifted transform through the same
dispatcher a plain call takes (:func:`call_wrapped_method`), keys its jit cache on
the active method wrappers and on a Module's dataclass fields, and marks the
methods it wraps itself so the dispatcher leaves them alone, and asks whether a
compact method is running or ``setup`` has run; linen-profiling asks whether a
module is inside ``setup``. This module is the contract between
linen-module and those siblings (and third-party packages that do the same):
the implementation in ``_dispatch.py``, ``_module.py`` and ``_state.py`` may change
in any release, the names in ``__all__`` keep their signature and meaning for a
whole minor series of linen-module (``0.1.x``), and changing one needs a new
minor version and a CHANGELOG entry.

>>> import jax.numpy as jnp
>>> from linen.module import Module, compact
>>> from linen.module.dispatch import call_wrapped_method, field_names
>>> class Scale(Module):
...     factor: float = 2.0
...     @compact
...     def __call__(self, x):
...         return x * self.factor
>>> field_names(Scale)
('factor',)
>>> def times(module, x):  # runs through the dispatcher, as a lifted method does
...     return call_wrapped_method(module, lambda m, y: m.factor * y, 'times', False, (x,), {})
>>> Scale().apply({}, jnp.ones(2), method=times)
Array([2., 2.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from linen.module._dispatch import MethodCallContext as MethodCallContext
from linen.module._dispatch import _call_wrapped_method
from linen.module._dispatch import active_wrappers as active_wrappers
from linen.module._dispatch import call_at_boundary as call_at_boundary
from linen.module._dispatch import invalidate_method_wrappers as invalidate_method_wrappers
from linen.module._dispatch import wrappers_are_relative as wrappers_are_relative
from linen.module.hookspecs import MethodWrapper as MethodWrapper

__all__ = [
    'MethodCallContext',
    'MethodWrapper',
    'active_wrappers',
    'call_at_boundary',
    'call_wrapped_method',
    'ensure_setup',
    'field_names',
    'in_compact_method',
    'in_setup',
    'invalidate_method_wrappers',
    'mark_dispatched',
    'setup_called',
    'wrappers_are_relative',
]

F = TypeVar('F', bound=Callable[..., Any])

# The dispatcher's entry, re-exported rather than wrapped: it is on every method
# call's path, and an extra Python frame there shows in the benchmarks.
call_wrapped_method = _call_wrapped_method


def mark_dispatched(fn: F) -> F:
    """Tell the Module class machinery that ``fn`` does its own dispatching.

    A method assigned to a Module subclass is normally wrapped by the dispatcher;
    one marked here is left as it is (a lifted method calls
    :func:`call_wrapped_method` itself, on the clone bound inside the transform).
    Returns ``fn``.
    """
    fn.method_handler_wrapped = True  # type: ignore[attr-defined]
    return fn


def field_names(module_class: type) -> tuple[str, ...]:
    """The dataclass fields of a Module class a user sets, without ``parent`` and ``name``."""
    return module_class._field_names  # type: ignore[attr-defined]


def in_setup(module: Any) -> bool:
    """Whether ``module`` is running its ``setup`` right now (False for non-Modules)."""
    state = getattr(module, '_state', None)
    return bool(getattr(state, 'in_setup', False))


def in_compact_method(module: Any) -> bool:
    """Whether a ``@compact`` method of ``module`` is running now (False for non-Modules).

    A lifted function called from there runs in compact mode too, as in Flax.
    """
    state = getattr(module, '_state', None)
    return bool(getattr(state, 'in_compact_method', False))


def setup_called(module: Any) -> bool:
    """Whether ``module``'s ``setup`` has run (False for non-Modules)."""
    state = getattr(module, '_state', None)
    return bool(getattr(state, 'setup_called', False))


def ensure_setup(module: Any) -> None:
    """Run ``module``'s ``setup`` now if it has not run (setup is otherwise lazy).

    A lifted transform that, as Flax's does, sets up the module it is called on
    before crossing the transform boundary (``nn.jit``) calls this.
    """
    module._try_setup()
