"""Calling the profiling-name hook."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from linen.core import _plugins


def derive_profiling_name(module: Any, method_name: str, method: Callable) -> str | None:
    """The label of ``module.method_name`` from the ``linen_profiling_name`` hook.

    ``None`` when no installed plugin implements the hook (linen-profiling does).
    """
    hook = getattr(_plugins.get_plugin_manager().hook, 'linen_profiling_name', None)
    if hook is None:
        return None
    return _plugins.call_hook(
        'linen_profiling_name', module=module, method_name=method_name, method=method
    )
