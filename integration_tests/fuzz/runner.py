"""Running one program's source text under Flax and under linen, stage by stage.

The source imports ``flax.linen as nn``; for linen the same text runs with that one
line swapped for ``import linen.nn as nn``. Both run in this process (each ``exec``
gets its own namespace), with the same inputs and the same PRNG keys. Stages:

``define``      executing the source (class definitions, transforms)
``init``        ``model.init(rngs, x)``
``eval_shape``  ``jax.eval_shape`` of that init (shapes, dtypes, boxes)
``lazy_init``   ``model.lazy_init(rngs, ShapeDtypeStruct)``
``apply``       ``model.apply(variables, x, rngs=..., mutable=[every non-param collection,
                'intermediates'])``: output, state updates, sown values
``jit_apply``   the same under ``jax.jit``
``capture``     ``apply`` with ``capture_intermediates=True``: every module's output
``intercept``   ``apply`` under ``nn.intercept_methods``: an interceptor doubling what each
                ``Dense`` call returns, and the names of the modules whose ``__call__`` it
                sees, in order (the other methods it sees are the libraries' own: the
                functions and ``setup`` of a lifted transform's inner module)
``grad``        ``jax.grad`` of ``sum(apply(...))`` with respect to params (and perturbations)
``penalty``     where the program says ``PENALTY``: reverse over reverse, as a gradient
                penalty takes it: ``jax.grad`` with respect to params of the squared
                ``jax.grad`` of ``sum(apply(...))`` with respect to the input
``method``      ``apply(..., method='head')`` where the root has a second method
``bind``        ``model.bind(...)``, a call on the bound module, then ``unbind()``
``clone``       where the program says ``CLONE``: ``init`` of ``model.clone()`` and
                ``apply`` of ``model.bind(...).clone(parent=None)`` (a bound root detached)
``partition``   ``nn.get_partition_spec`` and ``nn.logical_to_mesh`` under logical rules

A stage raising is an outcome like any other (compared by exception class); stages
after ``init`` run only when ``init`` succeeded.
"""

from __future__ import annotations

import functools
import sys
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp

from integration_tests.fuzz.compare import (
    Difference,
    ErrorInfo,
    Outcome,
    canonical,
    compare_outcomes,
)
from integration_tests.fuzz.grammar import FLAX_IMPORT, LINEN_IMPORT

LIBRARIES = ('flax', 'linen')
LOGICAL_RULES = (('embed', None), ('mlp', 'model'), ('batch', None), ('layers', None))


def library_source(source: str, library: str) -> str:
    """``source`` for ``library``: the one import line swapped."""
    if library == 'flax':
        return source
    if FLAX_IMPORT not in source:
        raise ValueError(f'a fuzz program must contain the line {FLAX_IMPORT!r}')
    return source.replace(FLAX_IMPORT, LINEN_IMPORT)


def _init_rngs():
    return {'params': jax.random.key(0), 'dropout': jax.random.key(1), 'noise': jax.random.key(2)}


def _apply_rngs():
    return {'dropout': jax.random.key(3), 'noise': jax.random.key(4)}


@dataclass
class _State:
    """What the stages of one library share: its namespace, input and variables."""

    ns: dict
    x: jax.Array = None  # type: ignore[assignment]
    variables: dict | None = None
    mutable: list[str] = field(default_factory=list)

    @property
    def nn(self):
        return self.ns['nn']

    def model(self):
        return self.ns['make_model']()


def _apply(state: _State, variables, x=None, **kwargs):
    x = state.x if x is None else x
    return state.model().apply(variables, x, rngs=_apply_rngs(), mutable=state.mutable, **kwargs)


def stage_init(state: _State):
    variables = state.model().init(_init_rngs(), state.x)
    state.variables = variables
    state.mutable = sorted({c for c in variables if c != 'params'} | {'intermediates'})
    return variables


def stage_eval_shape(state: _State):
    return jax.eval_shape(lambda x: state.model().init(_init_rngs(), x), state.x)


def stage_lazy_init(state: _State):
    return state.model().lazy_init(_init_rngs(), jax.ShapeDtypeStruct(state.x.shape, state.x.dtype))


def stage_apply(state: _State):
    return _apply(state, state.variables)


def stage_capture(state: _State):
    return _apply(state, state.variables, capture_intermediates=True)


def stage_intercept(state: _State):
    nn, calls = state.nn, []

    def interceptor(next_fun, args, kwargs, context):
        out = next_fun(*args, **kwargs)
        if context.method_name != '__call__':
            return out
        calls.append(context.module.name)
        return out * 2.0 if isinstance(context.module, nn.Dense) else out

    with nn.intercept_methods(interceptor):
        out = _apply(state, state.variables)
    return {'out': out, 'calls': calls}


def stage_jit_apply(state: _State):
    return jax.jit(lambda v: _apply(state, v))(state.variables)


def stage_grad(state: _State):
    variables = state.variables
    wrt = {c: variables[c] for c in ('params', 'perturbations') if c in variables}

    def loss(diff):
        y, _ = _apply(state, {**variables, **diff})
        return jnp.sum(y)

    return jax.grad(loss)(wrt)


def stage_penalty(state: _State):
    variables = state.variables
    params = variables['params']

    def output(params, x):
        y, _ = _apply(state, {**variables, 'params': params}, x)
        return jnp.sum(y)

    def penalty(params):
        g = jax.grad(output, argnums=1)(params, state.x)
        return jnp.sum(g * g)

    return jax.grad(penalty)(params)


def stage_method(state: _State):
    # Both spellings users write: the method's name, and the function itself.
    method = 'head' if state.ns.get('METHOD_BY_NAME', True) else type(state.model()).head
    return _apply(state, state.variables, method=method)


def stage_bind(state: _State):
    bound = state.model().bind(state.variables, rngs=_apply_rngs(), mutable=state.mutable)
    y = bound(state.x)
    module, variables = bound.unbind()
    return {'y': y, 'variables': variables, 'unbound': type(module).__name__}


def stage_clone(state: _State):
    clone = state.model().clone()
    variables = clone.init(_init_rngs(), state.x)
    bound = state.model().bind(state.variables, rngs=_apply_rngs(), mutable=state.mutable)
    detached = bound.clone(parent=None)
    applied = detached.apply(state.variables, state.x, rngs=_apply_rngs(), mutable=state.mutable)
    return {'init': variables, 'apply': applied, 'detached': type(detached).__name__}


def stage_partition(state: _State):
    nn = state.nn
    spec = nn.get_partition_spec(state.variables)
    with nn.logical_axis_rules(LOGICAL_RULES):
        mesh_axes = nn.logical_to_mesh(spec)
    return {'spec': spec, 'mesh': mesh_axes, 'unboxed': nn.unbox(state.variables)}


def _has_params(state: _State) -> bool:
    return bool(state.variables and state.variables.get('params'))


def _has_boxes(state: _State) -> bool:
    leaves = jax.tree_util.tree_leaves(
        state.variables,
        is_leaf=lambda x: type(x).__name__ in ('Partitioned', 'LogicallyPartitioned'),
    )
    return any(type(x).__name__ in ('Partitioned', 'LogicallyPartitioned') for x in leaves)


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[_State], object]
    applies: Callable[[_State], bool] = lambda state: True
    values: bool = True  # False: compare shapes and dtypes only


STAGES = (
    Stage('init', stage_init),
    Stage('eval_shape', stage_eval_shape, values=False),
    Stage('lazy_init', stage_lazy_init),
    Stage('apply', stage_apply),
    Stage('jit_apply', stage_jit_apply),
    Stage('capture', stage_capture),
    Stage('intercept', stage_intercept),
    Stage('grad', stage_grad, _has_params),
    Stage('penalty', stage_penalty, lambda s: bool(s.ns.get('PENALTY')) and _has_params(s)),
    Stage('method', stage_method, lambda s: bool(s.ns.get('HEAD'))),
    Stage('bind', stage_bind),
    Stage('clone', stage_clone, lambda s: bool(s.ns.get('CLONE'))),
    Stage('partition', stage_partition, _has_boxes),
)
STAGE_NAMES = ('define',) + tuple(s.name for s in STAGES)


def _guarded(run: Callable[[], object], values: bool = True) -> Outcome:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            result = run()
            outcome = Outcome(value=canonical(result, values))
        except Exception as exc:  # every failure is an outcome to compare
            outcome = Outcome(error=ErrorInfo.of(exc))
    outcome.warnings = tuple(sorted({w.category.__name__ for w in caught}))
    return outcome


_INPUTS: dict[tuple[int, ...], jax.Array] = {}


def _input(shape: tuple[int, ...]) -> jax.Array:
    if shape not in _INPUTS:
        _INPUTS[shape] = jax.random.normal(jax.random.key(42), shape, jnp.float32)
    return _INPUTS[shape]


def execute(source: str, library: str, stages: tuple[str, ...] | None = None) -> dict[str, Outcome]:
    """Every stage's outcome for ``library`` (``'flax'`` or ``'linen'``)."""
    # A real module object in sys.modules, as for any imported file: the dataclass
    # machinery looks the defining module up to resolve string annotations.
    module = types.ModuleType(f'fuzz_program_{library}')
    sys.modules[module.__name__] = module
    ns = module.__dict__
    code = compile(library_source(source, library), f'<fuzz program ({library})>', 'exec')
    outcomes = {'define': _guarded(lambda: exec(code, ns), values=False)}
    if outcomes['define'].error is not None:
        return outcomes
    state = _State(ns, _input(tuple(ns['INPUT_SHAPE'])))
    for stage in STAGES:
        if stages is not None and stage.name not in stages and stage.name != 'init':
            continue
        if not stage.applies(state):
            continue
        outcomes[stage.name] = _guarded(functools.partial(stage.run, state), stage.values)
        if stage.name == 'init' and outcomes['init'].error is not None:
            break
    return outcomes


def differences(source: str, stages: tuple[str, ...] | None = None) -> list[Difference]:
    """Run ``source`` under both libraries and list every difference, stage by stage."""
    flax = execute(source, 'flax', stages)
    linen = execute(source, 'linen', stages)
    diffs: list[Difference] = []
    for name in STAGE_NAMES:
        if name in flax and name in linen:
            diffs += compare_outcomes(name, flax[name], linen[name])
        elif (name in flax or name in linen) and not any(d.kind == 'raises' for d in diffs):
            ran = 'Flax' if name in flax else 'linen'
            diffs.append(Difference(name, 'stage-skipped', f'the stage ran only under {ran}'))
    return diffs


__all__ = ['LIBRARIES', 'STAGES', 'STAGE_NAMES', 'differences', 'execute', 'library_source']
