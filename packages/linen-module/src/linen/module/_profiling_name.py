"""The caller of the profiling-name hook (``linen_profiling_name``, see ``hookspecs.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from linen.core import plugin_bus


def derive_profiling_name(module: Any, method_name: str, method: Callable) -> str | None:
    """The label of ``module.method_name`` from the ``linen_profiling_name`` hook.

    ``None`` when no installed plugin implements the hook (linen-profiling does).
    """
    hook = getattr(plugin_bus.get_plugin_manager().hook, 'linen_profiling_name', None)
    if hook is None:
        return None
    return plugin_bus.call_hook(
        'linen_profiling_name', module=module, method_name=method_name, method=method
    )
