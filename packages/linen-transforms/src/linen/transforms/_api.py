"""The ``linen.nn`` transforms: each applies a lift (``lift.py``) to a Module class or method."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from linen.core import errors, meta
from linen.module import Module
from linen.module.dispatch import (
    call_at_boundary,
    call_wrapped_method,
    ensure_setup,
    field_names,
    in_compact_method,
    wrappers_are_relative,
)
from linen.transforms import (
    _args,
    _autodiff,
    _control,
    _direct,
    _jit,
    _remat,
    _scan,
    _variables,
    _vmap,
)
from linen.transforms._module_lift import (
    _check_returns,
    _mark,
    check_setup,
    is_partial_module_class,
    lift,
)

broadcast = _scan.broadcast


def vmap(
    target: Any,
    variable_axes: Mapping[Any, int | None] = {},
    split_rngs: Mapping[Any, bool] = {},
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_size: int | None = None,
    axis_name: str | None = None,
    spmd_axis_name: Any = None,
    metadata_params: Mapping[Any, Any] = {},
    methods: Sequence[str] | None = None,
) -> Any:
    """Vectorise a Module (class or method) over an axis, per collection.

    ``variable_axes={'params': 0}`` gives each slice its own parameters (stacked on
    axis 0); ``{'params': None}`` shares them. ``split_rngs={'params': True}`` gives
    each slice a different key.
    """

    def make(body):
        return _vmap.vmap(
            body,
            variable_axes,
            split_rngs,
            in_axes,
            out_axes,
            axis_size,
            axis_name,
            spmd_axis_name,
            metadata_params,
        )

    return lift('Vmap', target, make, methods, multi_scope=True)


def scan(
    target: Any,
    variable_axes: Mapping[Any, int] = {},
    variable_broadcast: Any = False,
    variable_carry: Any = False,
    split_rngs: Mapping[Any, bool] = {},
    in_axes: Any = 0,
    out_axes: Any = 0,
    length: int | None = None,
    reverse: bool = False,
    unroll: int = 1,
    data_transform: Callable | None = None,
    metadata_params: Mapping[Any, Any] = {},
    methods: Sequence[str] | None = None,
    _split_transpose: bool = False,
    check_constancy_invariants: bool = True,
) -> Any:
    """Loop a Module (``(carry, *xs) -> (carry, ys)``) over an axis with ``lax.scan``.

    ``check_constancy_invariants=False`` (as in Flax) skips the extra run before the
    loop: broadcast collections are then not created there, so initialising a
    ``variable_broadcast`` collection fails (``ScopeCollectionNotFound``) and only
    ``apply`` with existing variables works.
    """

    def make(body):
        return _scan.scan(
            body,
            variable_axes,
            variable_broadcast,
            variable_carry,
            split_rngs,
            in_axes,
            out_axes,
            length,
            reverse,
            unroll,
            data_transform,
            metadata_params,
            check_constancy_invariants,
        )

    return lift('Scan', target, make, methods, multi_scope=True)


def checkpoint(
    target: Any,
    variables: Any = True,
    rngs: Any = True,
    concrete: bool = False,
    prevent_cse: bool = True,
    static_argnums: int | Sequence[int] = (),
    policy: Callable | None = None,
    methods: Sequence[str] | None = None,
    *,
    static_call_argnums: int | Sequence[int] = (),
) -> Any:
    """Recompute a Module's activations on the backward pass (``jax.checkpoint``).

    ``static_argnums`` count as Flax's do, ``self`` being 0: for
    ``__call__(self, x, train)``, ``train`` is 2. ``static_call_argnums`` count
    the call's arguments as the caller writes them, ``module(x, train)``:
    ``train`` is 1. Negative indices count from the last argument in both.
    """
    _remat.check_concrete(concrete)
    call_argnums = _remat.flax_argnums_to_call(static_argnums)
    if isinstance(static_call_argnums, int):
        static_call_argnums = (static_call_argnums,)
    call_argnums = tuple(sorted(set(call_argnums) | set(static_call_argnums)))

    def make(body):
        return _remat.checkpoint(body, prevent_cse, call_argnums, policy, concrete)

    # a bad target fails here first
    lifted = lift('Checkpoint', target, make, methods, multi_scope=True)
    if call_argnums:
        if isinstance(target, type):
            for method_name in methods or ('__call__',):
                _remat.check_static_argnums(call_argnums, getattr(target, method_name))
        else:
            _remat.check_static_argnums(call_argnums, target)
    return lifted


remat = checkpoint


def remat_scan(
    target: Any,
    lengths: Sequence[int] = (),
    policy: Callable | None = None,
    variable_broadcast: Any = False,
    variable_carry: Any = False,
    variable_axes: Mapping[Any, int] = {True: 0},
    split_rngs: Mapping[Any, bool] = {True: True},
) -> Any:
    """``scan`` of ``remat`` nested once per entry of ``lengths`` (a ``x -> x`` body)."""

    def make(body):
        return _remat.remat_scan(
            body, lengths, policy, variable_broadcast, variable_carry, variable_axes, split_rngs
        )

    return lift('Remat_scan', target, make, None)


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
        static_argnums=static_argnums,
        static_argnames=static_argnames,
        donate_argnums=donate_argnums,
        device=device,
        backend=backend,
        module_key=_module_key,
    )
    if is_partial_module_class(target):
        lifted = jit(
            target.func,
            variables,
            rngs,
            static_argnums,
            static_argnames,
            donate_argnums,
            device,
            backend,
            methods,
        )
        return functools.partial(lifted, *target.args, **target.keywords)
    if isinstance(target, type):
        from linen.transforms._module_lift import Module

        if not issubclass(target, Module):
            raise errors.TransformTargetError(target)
        # `nn.jit(Dense)(...)` inside a compact method runs on every call: the same
        # wrapper class (hence the same compiled-function cache) must come back.
        cache_key = (target, tuple(methods or ('__call__',)), _options_key(options))
        try:
            cached = _JIT_CLASSES.get(cache_key)
        except TypeError:  # unhashable options (e.g. a device object): no caching
            cache_key, cached = None, None
        if cached is not None:
            return cached
        attrs: dict[str, Any] = {'__module__': target.__module__}
        for method_name in methods or ('__call__',):
            orig = getattr(target, method_name)
            attrs[method_name] = _jit_method(
                orig,
                method_name,
                lambda clone, _, *a, orig=orig, **k: orig(clone, *a, **k),
                options,
            )
        jitted_cls = type(f'Jit{target.__name__}', (target,), attrs)
        if cache_key is not None:
            _JIT_CLASSES[cache_key] = jitted_cls
        return jitted_cls
    if callable(target):
        fn = target
        is_compact = bool(getattr(fn, 'compact', False))
        name = getattr(fn, '__name__', 'method')

        def runner(clone, compact, *a, **k):
            # As in Flax, the function runs in compact mode when called from a compact method.
            return call_wrapped_method(clone, fn, name, is_compact or compact, a, k)

        return _jit_method(fn, name, runner, options)
    raise errors.TransformTargetError(target)


# Strong references: a weak cache would drop the class between two applies (types sit in
# reference cycles, freed at gc time) and retrace at random. One entry per (class, options).
_JIT_CLASSES: dict[tuple, type] = {}


def _options_key(options: dict) -> tuple:
    return tuple(
        (k, tuple(v) if isinstance(v, list) else v)
        for k, v in sorted(options.items())
        if k != 'module_key'
    )


def _module_key(extra, labelled: bool):
    """The part of a call that decides its trace: the module's class and fields, whether
    it runs in compact mode, and the Modules and Variables lifted from the arguments.

    The instance name joins only while a method wrapper is active that may do
    something per instance inside the trace. Profiling labels do not: the
    instance's own label is pushed outside the compiled function (see
    ``_jit_method``) and the labels inside are relative to it, so N instances of
    a class compile once.
    """
    module, compact, objects, lifted_fields = extra
    # Lifted field modules count by their slot (their own key is in `objects`).
    fields = tuple(
        lifted_fields[f] if f in lifted_fields else module.__dict__[f]
        for f in field_names(type(module))
    )
    name = module.name if labelled and not wrappers_are_relative() else None
    key = (type(module), name, _jit._hashable(fields), compact, _args.cache_key(objects))
    return key, extra


def _jit_method(orig: Callable, method_name: str, runner: Callable, options: dict) -> Callable:

    def body(extra, inner_scope, *args, **kwargs):
        module, compact, objects, fields = extra
        updates = {}
        if objects:
            inner_scope, others = inner_scope[0], inner_scope[1:]
            args, kwargs = _args.restore(args, kwargs, objects, others)
            updates = _args.restore_fields(fields, objects, others)
        y = runner(module.clone(parent=inner_scope, **updates), compact, *args, **kwargs)
        return _check_returns(y, method_name)

    jitted = _jit.jit(body, **options)
    # What the wrappers see as the method (the dispatcher's inner function).
    method = getattr(orig, 'inner_fun', orig)

    @functools.wraps(orig)
    def lifted(self, *args, **kwargs):
        scope = self.scope
        if scope is None:
            raise errors.CallCompactUnboundModuleError(type(self).__name__, method_name)
        # Bound Modules and Variables among the arguments are lifted too (Flax's
        # multi-scope lifting); they leave the arguments as empty pytrees.
        check_setup(self)
        # As in Flax (whose jit cache key reads the module's attributes), the module
        # itself is set up before the boundary: setup runs here once per call, and
        # once more per trace on the clone inside.
        ensure_setup(self)
        args, kwargs, objects = _args.extract(args, kwargs)
        fields = _args.extract_fields(self, objects)
        scopes = (scope, *_args.scopes_of(objects)) if objects else scope
        extra = (self, in_compact_method(self), objects, fields)
        # The instance's label (what depends on it) goes outside the compiled function.
        return call_at_boundary(
            self, method_name, method, lambda *a, **k: jitted(extra, scopes, *a, **k), args, kwargs
        )

    return _mark(lifted)


# ------------------------------------------------- transforms of (module, *args) functions


def _on_module(fn: Callable, mdl: Any) -> Callable:
    """``body(scope, *args)`` running ``fn(mdl', *args)`` with ``mdl'`` bound to ``scope``.

    The clone runs in compact mode, so submodules ``fn`` creates belong to it. A bound
    method of a Module (``nn.cond(pred, self.left, self.right, self, x)``) runs its
    function on the clone, as in Flax.
    """
    name = getattr(fn, '__name__', 'fn')
    if isinstance(getattr(fn, '__self__', None), Module):
        fn = fn.__func__

    def body(scope, *args, **kwargs):
        clone = mdl.clone(parent=scope)
        return call_wrapped_method(
            clone, lambda m, *a, **k: fn(m, *a, **k), name, True, args, kwargs
        )

    return body


def _module_scope(mdl: Any):
    if mdl.scope is None:
        raise errors.CallCompactUnboundModuleError(type(mdl).__name__, 'lifted function')
    return mdl.scope


def vjp(
    fn: Callable,
    mdl: Any,
    *primals,
    has_aux: bool = False,
    reduce_axes=(),
    vjp_variables: Any = 'params',
    variables: Any = True,
    rngs: Any = True,
    multi_scope: bool = False,
):
    """Lifted ``jax.vjp``: ``(y, vjp_fn)``; ``vjp_fn(ct)`` -> ``(variable_grads, *input_grads)``."""
    return _autodiff.vjp(
        _on_module(fn, mdl),
        _module_scope(mdl),
        *primals,
        has_aux=has_aux,
        vjp_variables=vjp_variables,
    )


def value_and_grad(
    fn: Callable,
    mdl: Any,
    *primals,
    has_aux: bool = False,
    reduce_axes=(),
    variables: Any = True,
    rngs: Any = True,
):
    """Lifted ``jax.value_and_grad`` with respect to the inputs (not the variables).

    ``((value, aux), grads)`` with ``has_aux`` (Flax's nn order; the functional
    ``lift.value_and_grad`` returns ``(value, aux, grads)``).
    """
    out = _autodiff.value_and_grad(
        _on_module(fn, mdl), _module_scope(mdl), *primals, has_aux=has_aux
    )
    return ((out[0], out[1]), out[2]) if has_aux else out


def grad(
    fn: Callable,
    mdl: Any,
    *primals,
    has_aux: bool = False,
    reduce_axes=(),
    variables: Any = True,
    rngs: Any = True,
):
    """Lifted ``jax.grad`` with respect to the inputs (not the variables)."""
    return _autodiff.grad(_on_module(fn, mdl), _module_scope(mdl), *primals, has_aux=has_aux)


def jvp(
    fn: Callable,
    mdl: Any,
    primals,
    tangents,
    variable_tangents,
    variables: Any = True,
    rngs: Any = True,
):
    """Lifted ``jax.jvp``: ``(y, y_tangent)``."""
    return _autodiff.jvp(
        _on_module(fn, mdl), _module_scope(mdl), primals, tangents, variable_tangents
    )


def custom_vjp(
    fn: Callable,
    forward_fn: Callable,
    backward_fn: Callable,
    grad_vars: Any = 'params',
    nondiff_argnums=(),
):
    """Lifted ``jax.custom_vjp``: returns ``f(mdl, *args)``."""

    def wrapper(mdl, *args):
        # Each function is called on a clone bound to the scope it is given.
        lifted = _autodiff.custom_vjp(
            _on_module(fn, mdl),
            _on_module(forward_fn, mdl),
            backward_fn,
            grad_vars,
            nondiff_argnums,
        )
        return lifted(_module_scope(mdl), *args)

    return wrapper


def cond(
    pred: Any,
    true_fun: Callable,
    false_fun: Callable,
    mdl: Any,
    *operands,
    variables: Any = True,
    rngs: Any = True,
):
    """Lifted ``lax.cond``; both branches get ``(mdl, *operands)``.

    Modules and Variables among the operands (and Modules in ``mdl``'s fields) are
    lifted too, as in Flax.
    """
    lifted = _direct.lift_direct((true_fun, false_fun), mdl, operands)
    return _control.cond(pred, *lifted.bodies, lifted.scopes, *lifted.operands)


def switch(
    index: Any,
    branches: Sequence[Callable],
    mdl: Any,
    *operands,
    variables: Any = True,
    rngs: Any = True,
):
    """Lifted ``lax.switch``; each branch gets ``(mdl, *operands)`` (lifted as in ``cond``)."""
    lifted = _direct.lift_direct(tuple(branches), mdl, operands)
    return _control.switch(index, lifted.bodies, lifted.scopes, *lifted.operands)


def while_loop(
    cond_fn: Callable,
    body_fn: Callable,
    mdl: Any,
    init: Any,
    carry_variables: Any = False,
    broadcast_variables: Any = True,
    split_rngs: Mapping[Any, bool] = {},
):
    """Lifted ``lax.while_loop``; ``carry_variables`` are threaded, the rest read-only.

    Modules and Variables in ``init`` (and Modules in ``mdl``'s fields) are lifted,
    as in Flax; ``body_fn`` may not return them (``TransformedMethodReturnValueError``).
    """
    lifted = _direct.lift_direct((cond_fn, body_fn), mdl, (init,))
    return _control.while_loop(
        *lifted.bodies,
        lifted.scopes,
        lifted.operands[0],
        carry_variables,
        broadcast_variables,
        split_rngs,
    )


def map_variables(
    target: Any,
    mapped_collections: Any = True,
    trans_in_fn: Callable = lambda x: x,
    trans_out_fn: Callable = lambda x: x,
    init: bool = False,
    mutable: bool = False,
    rngs: Any = True,
    variables: Any = True,
    methods: Sequence[str] | None = None,
) -> Any:
    """The target sees ``trans_in_fn`` of its variables; writes go back through ``trans_out_fn``."""

    def make(body):
        return _variables.map_variables(
            body, mapped_collections, trans_in_fn, trans_out_fn, init, mutable
        )

    return lift('Map_variables', target, make, methods)


def fold_rngs(target: Any, variables: Any = True, rngs: Any = True) -> Any:
    """The target's rng streams start from one fresh key each, drawn from the caller's."""
    return lift('Fold_rngs', target, _variables.fold_rngs_module, None)


def add_metadata_axis(
    target: Any,
    variable_axes: Mapping[Any, int] = {},
    metadata_params: Mapping[Any, Any] = {},
) -> Any:
    """Boxed variables of the target gain ``variable_axes`` in their metadata.

    As in Flax, one :func:`map_variables` per collection (so the class is named
    ``Map_variables...`` and, with no ``variable_axes``, the target is returned as is:
    the variable tree and the rng paths are Flax's).
    """
    params = dict(metadata_params)
    for col, axis in variable_axes.items():
        target = map_variables(
            target,
            col,
            trans_in_fn=functools.partial(meta.remove_axis, index=axis, params=params),
            trans_out_fn=functools.partial(meta.add_axis, index=axis, params=params),
            mutable=True,
        )
    return target
