"""``Module.tabulate``: Flax's method, provided by linen-profiling through the plugin bus.

linen-module does not import linen-profiling: the method looks ``tabulate`` up on
``linen.nn``, where linen-profiling exports it. Without linen-profiling the call
raises the usual install hint naming the distribution.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from linen.core import DenyList

__all__ = ['tabulate_method']


def tabulate_method(
    self,
    rngs: Any,
    *args: Any,
    depth: int | None = None,
    show_repeated: bool = False,
    mutable: Any = DenyList('intermediates'),
    console_kwargs: Mapping[str, Any] | None = None,
    table_kwargs: Mapping[str, Any] = MappingProxyType({}),
    column_kwargs: Mapping[str, Any] = MappingProxyType({}),
    compute_flops: bool = False,
    compute_vjp_flops: bool = False,
    show_sharding: bool = False,
    mesh: Any = None,
    replicated_tolerance: float = 0.1,
    **kwargs: Any,
) -> str:
    """The summary table of this module called on ``args`` (Flax's ``Module.tabulate``).

    One row per method call: path, module, input and output shapes, the variables
    each module holds per collection, optionally FLOPs (``compute_flops``) and
    forward-plus-backward FLOPs (``compute_vjp_flops``), optionally each
    parameter's layout on a mesh (``show_sharding``, ``mesh``,
    ``replicated_tolerance``). See
    ``linen.profiling.tabulate`` for the arguments; ``**kwargs`` are keyword
    arguments of the call (``method=`` selects the method).

    Raises:
      ImportError: linen-profiling, which provides the table, is not installed.
    """
    from linen import nn

    try:
        tabulate = nn.tabulate
    except AttributeError as error:
        raise ImportError(str(error)) from error
    return tabulate(
        self,
        rngs,
        depth=depth,
        show_repeated=show_repeated,
        mutable=mutable,
        console_kwargs=console_kwargs,
        table_kwargs=table_kwargs,
        column_kwargs=column_kwargs,
        compute_flops=compute_flops,
        compute_vjp_flops=compute_vjp_flops,
        show_sharding=show_sharding,
        mesh=mesh,
        replicated_tolerance=replicated_tolerance,
    )(*args, **kwargs)
