"""``Module.module_paths``: which Module instance runs at which path."""

from __future__ import annotations

from typing import Any

import jax

from linen.module._intercept import intercept_methods


def module_paths(module: Any, rngs: Any, *args: Any, mutable: Any, **kwargs: Any) -> dict:
    """``{path: unbound copy}`` of every Module called while ``module`` initializes.

    The forward pass runs under ``jax.eval_shape``: no FLOPs, no memory. Paths
    join scope names with ``/``; the root is ``''``. A Module called several
    times appears once.
    """
    found: dict[str, Any] = {}

    def record(next_fun, call_args, call_kwargs, context):
        scope = context.module.scope
        if scope is not None:
            path = '/'.join(map(str, scope.path))
            if path not in found:
                found[path] = context.module.clone(parent=None, name=None)
        return next_fun(*call_args, **call_kwargs)

    def run(rngs, *args):
        return module.init(rngs, *args, mutable=mutable, **kwargs)

    with intercept_methods(record):
        jax.eval_shape(run, rngs, *args)
    return found
