"""The ``linen.nn`` transforms: each applies a lift (``lift.py``) to a Module class or method."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from linen.core import errors
from linen.module._module import _call_wrapped_method
from linen.transforms import _jit, _remat, _scan, _vmap
from linen.transforms._module_lift import _mark, lift

broadcast = _scan.broadcast


def vmap(
    target: Any,
    variable_axes: Mapping[Any, int | None] = {},  # noqa: B006 - read only
    split_rngs: Mapping[Any, bool] = {},  # noqa: B006
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_size: int | None = None,
    axis_name: str | None = None,
    spmd_axis_name: Any = None,
    metadata_params: Mapping[Any, Any] = {},  # noqa: B006
    methods: Sequence[str] | None = None,
) -> Any:
    """Vectorise a Module (class or method) over an axis, per collection.

    ``variable_axes={'params': 0}`` gives each slice its own parameters (stacked on
    axis 0); ``{'params': None}`` shares them. ``split_rngs={'params': True}`` gives
    each slice a different key.
    """

    def make(body):
        return _vmap.vmap(
            body, variable_axes, split_rngs, in_axes, out_axes, axis_size, axis_name,
            spmd_axis_name, metadata_params,
        )

    return lift('Vmap', target, make, methods)


def scan(
    target: Any,
    variable_axes: Mapping[Any, int] = {},  # noqa: B006
    variable_broadcast: Any = False,
    variable_carry: Any = False,
    split_rngs: Mapping[Any, bool] = {},  # noqa: B006
    in_axes: Any = 0,
    out_axes: Any = 0,
    length: int | None = None,
    reverse: bool = False,
    unroll: int = 1,
    data_transform: Callable | None = None,
    metadata_params: Mapping[Any, Any] = {},  # noqa: B006
    methods: Sequence[str] | None = None,
    _split_transpose: bool = False,
) -> Any:
    """Loop a Module (``(carry, *xs) -> (carry, ys)``) over an axis with ``lax.scan``."""

    def make(body):
        return _scan.scan(
            body, variable_axes, variable_broadcast, variable_carry, split_rngs, in_axes,
            out_axes, length, reverse, unroll, data_transform, metadata_params,
        )

    return lift('Scan', target, make, methods)


def checkpoint(
    target: Any,
    variables: Any = True,
    rngs: Any = True,
    concrete: bool = False,
    prevent_cse: bool = True,
    static_argnums: int | Sequence[int] = (),
    policy: Callable | None = None,
    methods: Sequence[str] | None = None,
) -> Any:
    """Recompute a Module's activations on the backward pass (``jax.checkpoint``).

    ``static_argnums`` count the call's arguments as the caller writes them:
    for ``module(x, train)``, ``train`` is 1.
    """

    def make(body):
        return _remat.checkpoint(body, prevent_cse, static_argnums, policy, concrete)

    return lift('Checkpoint', target, make, methods)


remat = checkpoint


def remat_scan(
    target: Any,
    lengths: Sequence[int] = (),
    policy: Callable | None = None,
    variable_broadcast: Any = False,
    variable_carry: Any = False,
    variable_axes: Mapping[Any, int] = {True: 0},  # noqa: B006
    split_rngs: Mapping[Any, bool] = {True: True},  # noqa: B006
) -> Any:
    """``scan`` of ``remat`` nested once per entry of ``lengths`` (a ``x -> x`` body)."""

    def make(body):
        def step(scope, carry):
            return body(scope, carry), None

        fn = step
        for length in reversed(lengths):
            fn = _nest(fn, length, policy, variable_broadcast, variable_carry, variable_axes,
                       split_rngs)

        def run(scope, x):
            return fn(scope, x)[0]

        return run

    return lift('RematScan', target, make, None)


def _nest(fn, length, policy, variable_broadcast, variable_carry, variable_axes, split_rngs):
    remat_fn = _remat.checkpoint(fn, policy=policy)
    return _scan.scan(
        lambda scope, c: remat_fn(scope, c), variable_axes, variable_broadcast, variable_carry,
        split_rngs, length=length,
    )


def jit(
    target: Any,
    variables: Any = True,
    rngs: Any = True,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate_argnums: int | Sequence[int] = (),
    device: Any = None,
    backend: str | None = None,
    methods: Sequence[str] | None = None,
) -> Any:
    """Compile a Module's method with ``jax.jit``.

    Unlike Flax, the parameters a key gives do not change under ``nn.jit``; a
    retrace happens when the module's fields, static arguments, the scope's
    structure or the active method wrappers (profiling labels) change.
    """
    options = dict(
        static_argnums=static_argnums, static_argnames=static_argnames,
        donate_argnums=donate_argnums, device=device, backend=backend,
        module_key=_module_key,
    )
    if isinstance(target, type):
        from linen.transforms._module_lift import Module

        if not issubclass(target, Module):
            raise errors.TransformTargetError(target)
        attrs: dict[str, Any] = {'__module__': target.__module__}
        for method_name in methods or ('__call__',):
            orig = getattr(target, method_name)
            attrs[method_name] = _jit_method(orig, method_name, orig, options)
        return type(f'Jit{target.__name__}', (target,), attrs)
    if callable(target):
        fn = target
        is_compact = bool(getattr(fn, 'compact', False))
        name = getattr(fn, '__name__', 'method')

        def runner(clone, *a, **k):
            return _call_wrapped_method(clone, fn, name, is_compact, a, k)

        return _jit_method(fn, name, runner, options)
    raise errors.TransformTargetError(target)


def _module_key(module):
    fields = tuple(module.__dict__[f] for f in type(module)._field_names)
    return (type(module), module.name, _jit._hashable(fields)), module


def _jit_method(orig: Callable, method_name: str, runner: Callable, options: dict) -> Callable:
    def body(module, inner_scope, *args, **kwargs):
        return runner(module.clone(parent=inner_scope), *args, **kwargs)

    jitted = _jit.jit(body, **options)

    @functools.wraps(orig)
    def lifted(self, *args, **kwargs):
        if self.scope is None:
            raise errors.CallCompactUnboundModuleError(type(self).__name__, method_name)
        return jitted(self, self.scope, *args, **kwargs)

    return _mark(lifted)
