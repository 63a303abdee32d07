"""A descriptor harness that runs every layer through the same battery of checks.

Per-layer tests check numerics against an independent computation; this harness
checks what they tend to miss: that a layer survives ``jax.jit``, ``nn.vmap``,
``nn.remat``, float64 and bfloat16 inputs and gives the same answer each time.
Each layer family writes one table of :class:`LayerDescriptor` rows and a test
parametrized over ``(row, check)``::

    ROWS = [
        LayerDescriptor('Dense', lambda: nn.Dense(3), lambda key: (jax.random.normal(key, (2, 4)),)),
    ]

    @pytest.mark.parametrize('check', CHECKS)
    @pytest.mark.parametrize('desc', ROWS, ids=lambda d: d.name)
    def test_descriptor(desc, check):
        run_check(desc, check)

A check a descriptor opts out of (its ``skip`` mapping, with a reason) raises
:class:`unittest.SkipTest`, which pytest reports as a skip; the harness itself does
not import pytest. Nothing else skips: a check that raises fails.
"""

from __future__ import annotations

import dataclasses
import unittest
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    'CHECKS',
    'LayerDescriptor',
    'check_descriptor',
    'run_check',
]

CHECKS = ('init', 'abstract_init', 'apply', 'jit', 'vmap', 'remat', 'float64', 'bfloat16')

# Two slices are enough to catch a batch axis that leaks between examples.
_VMAP_SIZE = 2


class LayerDescriptor(NamedTuple):
    """One row of a layer table.

    Attributes:
      name: test id, usually the layer's class name plus a variant.
      make: builds a fresh, unbound module.
      inputs: given a PRNG key, the positional arguments of ``__call__``.
      rngs: rng streams besides ``'params'`` the layer needs (e.g. ``('dropout',)``),
        given at init and apply.
      mutable: collections the call mutates (e.g. ``('batch_stats',)``); ``()`` for none.
      kwargs: keyword arguments of ``__call__`` (e.g. ``{'deterministic': False}``).
      skip: ``{check_name: reason}`` for checks that do not apply to this layer.
      bf16_tol: relative tolerance (scaled by the output's magnitude) of the
        bfloat16 check against the float32 result.
    """

    name: str
    make: Callable[[], Any]
    inputs: Callable[[jax.Array], tuple]
    rngs: tuple[str, ...] = ()
    mutable: tuple[str, ...] = ()
    kwargs: Mapping[str, Any] = {}
    skip: Mapping[str, str] = {}
    bf16_tol: float = 5e-2


# --------------------------------------------------------------------------- helpers


def _keys(seed: int = 0):
    root = jax.random.key(seed)
    params_key, input_key, *stream_keys = jax.random.split(root, 10)
    return params_key, input_key, stream_keys


def _rngs(desc: LayerDescriptor, with_params: bool) -> dict:
    params_key, _, stream_keys = _keys()
    rngs = {name: stream_keys[i] for i, name in enumerate(desc.rngs)}
    if with_params:
        rngs['params'] = params_key
    return rngs


def _inputs(desc: LayerDescriptor) -> tuple:
    _, input_key, _ = _keys()
    return tuple(desc.inputs(input_key))


def _mutable(desc: LayerDescriptor):
    return list(desc.mutable) if desc.mutable else False


def _init(desc: LayerDescriptor, *inputs):
    return desc.make().init(_rngs(desc, with_params=True), *inputs, **desc.kwargs)


# Eager init of a descriptor's default inputs, once per process: every check but
# 'init' (which runs init itself, twice) only needs the variables. The rows are
# module-level constants, so their ids are stable while the process lives.
_INITIALIZED: dict[int, tuple[LayerDescriptor, Any]] = {}


def _variables(desc: LayerDescriptor):
    hit = _INITIALIZED.get(id(desc))
    if hit is None or hit[0] is not desc:
        hit = _INITIALIZED[id(desc)] = (desc, _init(desc, *_inputs(desc)))
    return hit[1]


def _apply(desc: LayerDescriptor, module, variables, *inputs):
    return module.apply(
        variables,
        *inputs,
        rngs=_rngs(desc, with_params=False),
        mutable=_mutable(desc),
        **desc.kwargs,
    )


def _constructor_kwargs(module) -> dict:
    """The dataclass fields a module was built with, to rebuild it under a transform."""
    return {
        f.name: getattr(module, f.name)
        for f in dataclasses.fields(module)
        if f.init and f.name not in ('parent', 'name')
    }


def _with_call_kwargs(module_cls, kwargs: Mapping[str, Any]):
    """A subclass of ``module_cls`` whose ``__call__`` always gets ``kwargs``.

    Lifted transforms map over positional arguments only, so keyword arguments
    of the call are bound into the class before the transform sees it.
    """
    if not kwargs:
        return module_cls

    def __call__(self, *args):
        return super(bound_cls, self).__call__(*args, **kwargs)

    bound_cls = type(module_cls.__name__, (module_cls,), {'__call__': __call__})
    return bound_cls


def _is_float(x) -> bool:
    return hasattr(x, 'dtype') and jnp.issubdtype(x.dtype, jnp.floating)


def _cast_floats(tree, dtype):
    return jax.tree_util.tree_map(lambda x: x.astype(dtype) if _is_float(x) else x, tree)


def _assert_trees_close(actual, expected, *, what: str, rtol: float, atol: float, scaled=False):
    actual_leaves, actual_def = jax.tree_util.tree_flatten(actual)
    expected_leaves, expected_def = jax.tree_util.tree_flatten(expected)
    if actual_def != expected_def:
        raise AssertionError(f'{what}: tree structure {actual_def} != {expected_def}')
    for i, (a, e) in enumerate(zip(actual_leaves, expected_leaves)):
        if np.shape(a) != np.shape(e):
            raise AssertionError(f'{what}: leaf {i} shape {np.shape(a)} != {np.shape(e)}')
        a64 = np.asarray(jnp.asarray(a, jnp.float32)) if _is_float(a) else np.asarray(a)
        e64 = np.asarray(jnp.asarray(e, jnp.float32)) if _is_float(e) else np.asarray(e)
        leaf_atol = atol * max(1.0, float(np.max(np.abs(e64)))) if scaled and e64.size else atol
        np.testing.assert_allclose(
            a64, e64, rtol=rtol, atol=leaf_atol, err_msg=f'{what}: leaf {i} differs'
        )


def _assert_finite(tree, what: str):
    for i, leaf in enumerate(jax.tree_util.tree_leaves(tree)):
        if _is_float(leaf) and not bool(jnp.all(jnp.isfinite(leaf))):
            raise AssertionError(f'{what}: leaf {i} has non-finite values')


def _transforms(name: str):
    # linen-layers depends on linen-transforms: a transform that fails to import is a
    # failure of the check, never a reason to skip it.
    import linen.transforms as transforms

    return getattr(transforms, name)


# --------------------------------------------------------------------------- checks


def _check_init(desc: LayerDescriptor):
    inputs = _inputs(desc)
    variables = _init(desc, *inputs)
    if not isinstance(variables, Mapping):
        raise AssertionError(f'init returned {type(variables).__name__}, not a mapping')
    _assert_finite(variables, 'init variables')
    again = _init(desc, *inputs)
    _assert_trees_close(again, variables, what='init is deterministic', rtol=0, atol=0)
    return variables


def _check_abstract_init(desc: LayerDescriptor):
    # Inputs given as jax.ShapeDtypeStructs: lazy_init must give init's very
    # values, and init under eval_shape its shapes and dtypes.
    inputs = _inputs(desc)
    variables = _variables(desc)
    abstract = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), inputs)
    lazy = desc.make().lazy_init(_rngs(desc, with_params=True), *abstract, **desc.kwargs)
    if jax.tree_util.tree_structure(lazy) != jax.tree_util.tree_structure(variables):
        raise AssertionError('lazy_init and init build different variable trees')
    for leaf in jax.tree_util.tree_leaves(lazy):
        if not isinstance(leaf, jax.Array):
            raise AssertionError(f'lazy_init returned a {type(leaf).__name__}, not an array')
    _assert_trees_close(lazy, variables, what='lazy_init vs init', rtol=0, atol=0)
    shapes = jax.eval_shape(lambda *xs: _init(desc, *xs), *abstract)
    expected = jax.tree_util.tree_map(lambda v: (v.shape, v.dtype), variables)
    if jax.tree_util.tree_map(lambda v: (v.shape, v.dtype), shapes) != expected:
        raise AssertionError('init under eval_shape: shapes or dtypes differ from init')


def _check_apply(desc: LayerDescriptor):
    inputs = _inputs(desc)
    variables = _variables(desc)
    out = _apply(desc, desc.make(), variables, *inputs)
    _assert_finite(out, 'apply output')
    return out


def _check_jit(desc: LayerDescriptor):
    inputs = _inputs(desc)
    variables = _variables(desc)
    module = desc.make()
    expected = _apply(desc, module, variables, *inputs)
    jitted = jax.jit(lambda v, *xs: _apply(desc, module, v, *xs))
    _assert_trees_close(
        jitted(variables, *inputs), expected, what='jit(apply) vs apply', rtol=1e-5, atol=1e-5
    )
    jit_init = jax.jit(lambda *xs: _init(desc, *xs))
    _assert_trees_close(
        jit_init(*inputs), variables, what='jit(init) vs init', rtol=1e-6, atol=1e-6
    )


def _check_vmap(desc: LayerDescriptor):
    vmap = _transforms('vmap')
    _, input_key, _ = _keys()
    slices = [tuple(desc.inputs(k)) for k in jax.random.split(input_key, _VMAP_SIZE)]
    module = desc.make()
    variables = _variables(desc)
    mutable = set(desc.mutable)
    # Read-only collections are shared by every slice; a mutated collection must
    # carry a batch axis, since each slice updates it differently.
    variable_axes = {col: (0 if col in mutable else None) for col in variables}
    batched_variables = {
        col: (
            jax.tree_util.tree_map(lambda v: jnp.stack([v] * _VMAP_SIZE), tree)
            if col in mutable
            else tree
        )
        for col, tree in variables.items()
    }
    split_rngs = {name: False for name in ('params', *desc.rngs)}
    vmapped_cls = vmap(
        _with_call_kwargs(type(module), desc.kwargs),
        variable_axes=variable_axes,
        split_rngs=split_rngs,
        in_axes=0,
        out_axes=0,
    )
    vmapped = vmapped_cls(**_constructor_kwargs(module))
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *slices)
    out = vmapped.apply(
        batched_variables, *stacked, rngs=_rngs(desc, with_params=False), mutable=_mutable(desc)
    )
    for i, xs in enumerate(slices):
        expected = _apply(desc, module, variables, *xs)
        got = jax.tree_util.tree_map(lambda leaf, i=i: leaf[i], out)
        _assert_trees_close(got, expected, what=f'vmap slice {i} vs apply', rtol=1e-5, atol=1e-5)


def _check_remat(desc: LayerDescriptor):
    remat = _transforms('remat')
    inputs = _inputs(desc)
    module = desc.make()
    variables = _variables(desc)
    expected = _apply(desc, module, variables, *inputs)
    rematted = remat(_with_call_kwargs(type(module), desc.kwargs))(**_constructor_kwargs(module))

    def apply_remat(v, *xs):
        return rematted.apply(v, *xs, rngs=_rngs(desc, with_params=False), mutable=_mutable(desc))

    _assert_trees_close(
        apply_remat(variables, *inputs),
        expected,
        what='remat vs apply',
        rtol=1e-5,
        atol=1e-5,
    )
    # Gradients through a rematerialized layer must match the plain ones.
    float_inputs = [i for i, x in enumerate(inputs) if _is_float(x)]
    if not float_inputs:
        return

    def loss(apply_fn):
        def scalar(v, *xs):
            out = apply_fn(v, *xs)
            out = out[0] if desc.mutable else out
            leaves = [leaf for leaf in jax.tree_util.tree_leaves(out) if _is_float(leaf)]
            return sum(jnp.sum(jnp.sin(leaf.astype(jnp.float32))) for leaf in leaves)

        return scalar

    argnums = (0, 1 + float_inputs[0])
    # Compiled: one program per gradient costs far less than compiling each op of an
    # eager backward pass, and remat's recomputation is only visible in a traced one.
    g_plain = jax.jit(jax.grad(loss(lambda v, *xs: _apply(desc, module, v, *xs)), argnums=argnums))(
        variables, *inputs
    )
    g_remat = jax.jit(jax.grad(loss(apply_remat), argnums=argnums))(variables, *inputs)
    _assert_trees_close(g_remat, g_plain, what='grad under remat', rtol=1e-5, atol=1e-5)


def _check_float64(desc: LayerDescriptor):
    inputs = _inputs(desc)
    variables = _variables(desc)
    # Compiled on both sides (eager apply is the 'apply' check): under x64 every op
    # would compile again for the 64-bit dtypes, and a compiled program may round a
    # low-precision compute dtype differently from the eager one.
    expected = jax.jit(lambda v, *xs: _apply(desc, desc.make(), v, *xs))(variables, *inputs)
    with jax.enable_x64(True):
        inputs64 = _cast_floats(inputs, jnp.float64)
        out = jax.jit(lambda v, *xs: _apply(desc, desc.make(), v, *xs))(variables, *inputs64)
        # Initialization must also work with 64-bit inputs.
        jax.eval_shape(lambda *xs: _init(desc, *xs), *inputs64)
    _assert_finite(out, 'float64 output')
    if desc.rngs:
        # jax.random draws 64-bit uniforms under x64, so a stochastic layer's
        # mask legitimately differs from the 32-bit one: compare structure only.
        same_shapes = jax.tree_util.tree_map(np.shape, out) == jax.tree_util.tree_map(
            np.shape, expected
        )
        if not same_shapes:
            raise AssertionError('float64 vs float32: output shapes differ')
        return
    _assert_trees_close(out, expected, what='float64 vs float32', rtol=1e-4, atol=1e-4, scaled=True)


def _check_bfloat16(desc: LayerDescriptor):
    inputs = _inputs(desc)
    variables = _variables(desc)
    expected = _apply(desc, desc.make(), variables, *inputs)
    out = _apply(desc, desc.make(), variables, *_cast_floats(inputs, jnp.bfloat16))
    _assert_finite(out, 'bfloat16 output')
    _assert_trees_close(
        out,
        expected,
        what='bfloat16 vs float32',
        rtol=desc.bf16_tol,
        atol=desc.bf16_tol,
        scaled=True,
    )


_CHECK_FNS = {
    'init': _check_init,
    'abstract_init': _check_abstract_init,
    'apply': _check_apply,
    'jit': _check_jit,
    'vmap': _check_vmap,
    'remat': _check_remat,
    'float64': _check_float64,
    'bfloat16': _check_bfloat16,
}


def run_check(desc: LayerDescriptor, check: str) -> None:
    """Runs one named check of :data:`CHECKS` on ``desc``.

    Raises:
      unittest.SkipTest: the descriptor opts out of the check (``desc.skip``).
      AssertionError: the layer failed the check.
    """
    if check not in _CHECK_FNS:
        raise ValueError(f'Unknown check {check!r}; expected one of {CHECKS}.')
    if check in desc.skip:
        raise unittest.SkipTest(f'{desc.name}: {desc.skip[check]}')
    _CHECK_FNS[check](desc)


def check_descriptor(desc: LayerDescriptor, checks=CHECKS) -> dict[str, str]:
    """Runs every check in ``checks`` on ``desc``.

    Returns:
      ``{check: 'ok' | 'skipped: <reason>'}``; a failing check raises.
    """
    results = {}
    for check in checks:
        try:
            run_check(desc, check)
        except unittest.SkipTest as skip:
            results[check] = f'skipped: {skip}'
        else:
            results[check] = 'ok'
    return results
