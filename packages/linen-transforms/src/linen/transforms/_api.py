"""The ``linen.nn`` transforms: each applies a lift (``lift.py``) to a Module class or method."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from linen.core import Variable, errors, meta
from linen.module import Module
from linen.module.dispatch import call_wrapped_method, field_names
from linen.transforms import (
    _args,
    _autodiff,
    _control,
    _direct,
    _jit_module,
    _remat,
    _scan,
    _variables,
    _vmap,
)
from linen.transforms._module_lift import is_partial_module_class, lift
from linen.transforms.errors import (
    ModuleArgumentUnsupportedError,
    ReduceAxesArgumentError,
    TransformArgumentError,
)

broadcast = _scan.broadcast


def _per_method(target: Any, methods: Any) -> bool:
    """``methods`` is a dict and ``target`` a Module class (or a partial of one). As in
    Flax, a function target (decorator use) ignores ``methods``."""
    if not isinstance(methods, Mapping):
        return False
    cls = target.func if is_partial_module_class(target) else target
    return isinstance(cls, type) and issubclass(cls, Module)


def _each_method(transform: Callable, target: Any, methods: Mapping[str, Mapping]) -> Any:
    """``methods={'name': {...kwargs}}``: each method lifted with its own arguments.

    As in Flax, a method's dict holds all of its transform's arguments (the
    transform's defaults fill the rest, not the call's other arguments).
    """
    partial_args: tuple = ()
    partial_kwargs: dict = {}
    cls = target
    if is_partial_module_class(target):
        cls, partial_args, partial_kwargs = target.func, target.args, target.keywords
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise errors.TransformTargetError(target)
    attrs: dict[str, Any] = {}
    name = None
    for method_name, kwargs in methods.items():
        one = transform(cls, **dict(kwargs), methods=(method_name,))
        attrs[method_name] = one.__dict__[method_name]
        name = one.__name__
    if name is None:
        return target
    attrs['__module__'] = cls.__module__
    attrs['__qualname__'] = name
    lifted = type(name, (cls,), attrs)
    if partial_args or partial_kwargs or cls is not target:
        return functools.partial(lifted, *partial_args, **partial_kwargs)
    return lifted


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
    methods: Sequence[str] | Mapping[str, Mapping] | None = None,
) -> Any:
    """Vectorise a Module (class or method) over an axis, per collection.

    ``variable_axes={'params': 0}`` gives each slice its own parameters (stacked on
    axis 0); ``{'params': None}`` shares them. ``split_rngs={'params': True}`` gives
    each slice a different key, ``False`` the same key. As in Flax, a collection no
    entry names stays outside: the body neither reads nor writes it (a ``sow`` there
    records nothing); so does an rng stream ``split_rngs`` does not name (``has_rng``
    says False there; drawing from it is Flax's ``InvalidRngError``, or its fallback to
    ``params``).
    """

    if _per_method(target, methods):
        return _each_method(vmap, target, methods)

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
    methods: Sequence[str] | Mapping[str, Mapping] | None = None,
    _split_transpose: bool = False,
    check_constancy_invariants: bool = True,
) -> Any:
    """Loop a Module (``(carry, *xs) -> (carry, ys)``) over an axis with ``lax.scan``.

    ``split_rngs={'dropout': True}`` gives each step a different key, ``False`` the same
    key; as in Flax, a stream ``split_rngs`` does not name is not in the body
    (``has_rng`` says False there; drawing from it is Flax's ``InvalidRngError``, or its
    fallback to ``params``).

    ``check_constancy_invariants=False`` (as in Flax) skips the extra run before the
    loop: broadcast collections are then not created there, so initialising a
    ``variable_broadcast`` collection fails (``ScopeCollectionNotFound``) and only
    ``apply`` with existing variables works.
    """

    if _per_method(target, methods):
        return _each_method(scan, target, methods)

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
    methods: Sequence[str] | Mapping[str, Mapping] | None = None,
    *,
    static_call_argnums: int | Sequence[int] = (),
) -> Any:
    """Recompute a Module's activations on the backward pass (``jax.checkpoint``).

    ``static_argnums`` count as Flax's do, ``self`` being 0: for
    ``__call__(self, x, train)``, ``train`` is 2; as in Flax, they are placed on
    each call among the arguments passed positionally (one past them raises
    JAX's ``ValueError``, Flax's negative indices keep Flax's meaning: ``-2`` is the
    last argument). ``static_call_argnums`` (linen's) count the call's arguments
    as the caller writes them, ``module(x, train)``: ``train`` is 1; negative
    indices count from the last argument, and one past the method's arguments is
    refused here.
    """
    if _per_method(target, methods):
        return _each_method(checkpoint, target, methods)
    _remat.check_concrete(concrete)
    flax_argnums = _remat.flax_argnums(static_argnums)
    if isinstance(static_call_argnums, int):
        static_call_argnums = (static_call_argnums,)
    call_argnums = tuple(sorted(set(static_call_argnums)))

    def make(body):
        return _remat.checkpoint_over_scopes(
            body,
            prevent_cse,
            call_argnums,
            policy,
            concrete,
            flax_static_argnums=flax_argnums,
            variables=variables,
            rngs=rngs,
        )

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
    methods: Sequence[str] | Mapping[str, Mapping] | None = None,
) -> Any:
    """Compile a Module's method with ``jax.jit``.

    Unlike Flax, the parameters a key gives do not change under ``nn.jit``; a
    retrace happens when the module's fields, static arguments, the scope's
    structure or the active method wrappers (profiling labels) change.

    ``static_argnums`` and ``donate_argnums`` count as Flax's do, the module being
    0: for ``__call__(self, x, train)`` (or a function ``fn(module, x, train)``),
    ``train`` is 2. As in Flax, 0, negative indices and indices past the call's
    arguments mark nothing.
    """
    options = dict(
        static_argnums=_jit_module.flax_argnums_to_call(static_argnums),
        static_argnames=static_argnames,
        donate_argnums=_jit_module.flax_argnums_to_call(donate_argnums),
        device=device,
        backend=backend,
        variables=variables,
        rngs=rngs,
    )
    if is_partial_module_class(target):
        lifted = _jit_module.jit_class(target.func, methods, options)
        return functools.partial(lifted, *target.args, **target.keywords)
    if isinstance(target, type):
        return _jit_module.jit_class(target, methods, options)
    if callable(target) and not isinstance(target, Module):
        return _jit_module.jit_method(target, options)
    raise errors.TransformTargetError(target)


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


_HELD = (Module, Variable)


def _refuse_module_primals(transform: str, primals: Any) -> None:
    """As Flax's, ``nn.jvp`` and ``nn.vjp`` lift the module's scope alone."""
    for leaf in jax.tree_util.tree_leaves(primals):
        if isinstance(leaf, Module):
            raise ModuleArgumentUnsupportedError(transform, type(leaf).__name__)


def _refuse_module_fields(transform: str, mdl: Any) -> None:
    """As Flax's, ``nn.jvp``, ``nn.vjp`` and ``nn.custom_vjp`` refuse a module holding
    Modules or Variables in its fields: they lift ``mdl``'s scope alone, so the
    variables of a field's module or Variable (another scope's) would pass through as
    constants."""
    if not isinstance(mdl, Module):
        return
    for name in field_names(type(mdl)):
        value = mdl.__dict__.get(name)
        leaves = jax.tree_util.tree_leaves(value, is_leaf=lambda x: isinstance(x, _HELD))
        for leaf in leaves:
            if isinstance(leaf, _HELD):
                held = 'Module' if isinstance(leaf, Module) else 'Variable'
                raise ModuleArgumentUnsupportedError(transform, type(mdl).__name__, name, held)


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
    """Lifted ``jax.vjp``: ``(y, vjp_fn)``; ``vjp_fn(ct)`` -> ``(variable_grads, *input_grads)``.

    With ``multi_scope``, as in Flax, the Modules ``mdl`` holds in its fields are lifted
    with it and ``variable_grads`` is a list of one ``{collection: grads}`` per scope:
    the field modules' in the order they are found, ``mdl``'s own last.
    """
    if reduce_axes:
        raise ReduceAxesArgumentError('vjp')
    _refuse_module_primals('vjp', primals)
    scope, objects = _module_scope(mdl), []
    if multi_scope:
        fields = _args.extract_fields(mdl, objects)
    else:
        _refuse_module_fields('vjp', mdl)
    if objects:
        body = _direct.module_body(fn, mdl, objects, fields)
        scope = (scope, *_args.scopes_of(objects))
    else:
        body = _on_module(fn, mdl)
    out = _autodiff.vjp(
        body,
        scope,
        *primals,
        has_aux=has_aux,
        vjp_variables=vjp_variables,
        variables=variables,
        rngs=rngs,
    )
    if not multi_scope:
        return out
    vjp_fn = out[1]

    def per_scope_vjp(cotangent):
        grads, *input_grads = vjp_fn(cotangent)
        own, *lifted = grads if objects else (grads,)
        return ([*lifted, own], *input_grads)

    return (out[0], per_scope_vjp, *out[2:])


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
    if reduce_axes:
        raise ReduceAxesArgumentError('value_and_grad')
    out = _scalar_value_and_grad(fn, mdl, primals, has_aux, variables, rngs)
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
    if reduce_axes:
        raise ReduceAxesArgumentError('grad')
    out = _scalar_value_and_grad(fn, mdl, primals, has_aux, variables, rngs)
    return (out[2], out[1]) if has_aux else out[1]


def _scalar_value_and_grad(
    fn: Callable, mdl: Any, primals: tuple, has_aux: bool, variables: Any, rngs: Any
) -> tuple:
    """``lift.value_and_grad`` of ``fn`` on ``mdl``'s scope, refusing a non-scalar value.

    The functional ``lift.value_and_grad`` differentiates the sum of a non-scalar
    value, as Flax's does; Flax's ``nn.grad``/``nn.value_and_grad`` refuse it.
    """
    scope = _module_scope(mdl)
    primals, _, objects = _args.extract(tuple(primals), {})
    fields = _args.extract_fields(mdl, objects)
    if objects:
        # Modules and Variables among the primals, and bound Modules in mdl's fields,
        # are lifted with mdl, as in Flax (a field module made by the parent would
        # otherwise update its own scope from inside the trace); a primal's gradient
        # place holds a pytree with no leaves, as Flax's placeholder.
        body = _direct.module_body(fn, mdl, objects, fields)
        scope = (scope, *_args.scopes_of(objects))
    else:
        body = _on_module(fn, mdl)

    out = _autodiff.value_and_grad(
        body, scope, *primals, has_aux=has_aux, variables=variables, rngs=rngs
    )
    if jnp.shape(out[0]) != ():
        raise TransformArgumentError(
            'grad can only work on functions with scalar-valued outputs. out shape='
            f'{jnp.shape(out[0])}. Return a scalar from the differentiated function (e.g. '
            'reduce it with .sum() or .mean()), or use nn.vjp with a cotangent.'
        )
    return out


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
    _refuse_module_primals('jvp', primals)
    _refuse_module_fields('jvp', mdl)
    return _autodiff.jvp(
        _on_module(fn, mdl),
        _module_scope(mdl),
        primals,
        tangents,
        variable_tangents,
        variables=variables,
        rngs=rngs,
    )


def custom_vjp(
    fn: Callable,
    forward_fn: Callable,
    backward_fn: Callable,
    grad_vars: Any = 'params',
    nondiff_argnums=(),
):
    """Lifted ``jax.custom_vjp``: returns ``f(mdl, *args)``.

    ``nondiff_argnums`` count ``mdl`` as argument 0, as Flax's do.
    """

    def wrapper(mdl, *args):
        _refuse_module_fields('custom_vjp', mdl)
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
    lifted too, as in Flax. A branch sees (and may change) only the collections
    ``variables`` admits and draws only from the rng streams ``rngs`` admits.
    """
    lifted = _direct.lift_direct((true_fun, false_fun), mdl, operands, 'cond')
    return _control.cond(
        pred, *lifted.bodies, lifted.scopes, *lifted.operands, variables=variables, rngs=rngs
    )


def switch(
    index: Any,
    branches: Sequence[Callable],
    mdl: Any,
    *operands,
    variables: Any = True,
    rngs: Any = True,
):
    """Lifted ``lax.switch``; each branch gets ``(mdl, *operands)`` (lifted as in ``cond``)."""
    lifted = _direct.lift_direct(tuple(branches), mdl, operands, 'switch')
    return _control.switch(
        index, lifted.bodies, lifted.scopes, *lifted.operands, variables=variables, rngs=rngs
    )


def while_loop(
    cond_fn: Callable,
    body_fn: Callable,
    mdl: Any,
    init: Any,
    carry_variables: Any = False,
    broadcast_variables: Any = True,
    split_rngs: Mapping[Any, bool] = {},
):
    """Lifted ``lax.while_loop``; ``carry_variables`` are threaded, ``broadcast_variables``
    read-only, and (as in Flax) the functions see no other collection and only the rng
    streams ``split_rngs`` names (those set to True fold in the iteration).

    Modules and Variables in ``init`` (and Modules in ``mdl``'s fields) are lifted,
    as in Flax; ``body_fn`` may not return them (``TransformedMethodReturnValueError``).
    """
    lifted = _direct.lift_direct((cond_fn, body_fn), mdl, (init,), 'while_loop')
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
    methods: Sequence[str] | Mapping[str, Mapping] | None = None,
) -> Any:
    """The target sees ``trans_in_fn`` of its variables; writes go back through ``trans_out_fn``.

    As in Flax, the target sees only the mapped collections and the others
    ``variables`` admits, and only the rng streams ``rngs`` admits.
    """

    if _per_method(target, methods):
        return _each_method(map_variables, target, methods)

    def make(body):
        return _variables.map_variables(
            body, mapped_collections, trans_in_fn, trans_out_fn, init, mutable, rngs, variables
        )

    return lift('Map_variables', target, make, methods, multi_scope=True)


def fold_rngs(target: Any, variables: Any = True, rngs: Any = True) -> Any:
    """The target's rng streams start from one fresh key each, drawn from the caller's.

    As in Flax, the target sees only the collections ``variables`` admits and only the
    rng streams ``rngs`` admits.
    """
    return lift(
        'Fold_rngs',
        target,
        functools.partial(_variables.fold_rngs_module, variables=variables, rngs=rngs),
        None,
    )


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
