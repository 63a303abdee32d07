"""Logical axis names and the rules that map them to mesh axes, as in ``flax.linen.spmd``.

Layers name their dimensions logically (``('embed', 'mlp')``); a list of rules
``[(logical_name, mesh_axes), ...]`` decides which mesh axis each name is sharded
over. Rules are tried in order; a rule applies to the dimensions with its logical
name that are still unassigned, provided none of its mesh axes is already taken
by another dimension of the same array; a rule whose mesh axes are ``None`` makes
the dimension replicated. Dimensions no rule assigns are replicated.

The active rules are context-local (a ``contextvars.ContextVar``): a thread or an
asyncio task that sets them does not change them for others.

Rules are checked where they are applied to an array, so a problem is reported
with the parameter path (``params/Dense_0/kernel``) and the axis. A mesh axis the
mesh lacks raises :class:`LogicalAxisRulesError` (a ``ValueError``, as in Flax).
Rules that are likely wrong (a logical name no rule maps, an identical rule twice, a
spec whose rank differs from the array's, a constraint with rules but no mesh) are
what Flax documents as fallbacks, and pass silently as in Flax (a program run with
warnings as errors must behave as under Flax). Strict mode (``strict=True``, config
``linen_strict_logical_rules``, env ``LINEN_STRICT_LOGICAL_RULES``) turns each into a
:class:`LogicalAxisRulesError`, as it does two rules for one logical name and two
logical dimensions of one parameter mapped to one mesh axis (an activation keeps the
second, which FSDP layouts rely on).

Under a mesh whose axes are ``Explicit`` (``jax.make_mesh``'s default), a sharding
constraint is an assertion in JAX; :func:`with_logical_constraint` then reshards
with ``jax.sharding.reshard`` instead, so the same model code runs under Auto,
Explicit and mixed meshes.

>>> rules = (('batch', 'data'), ('embed', 'model'), ('mlp', 'model'))
>>> logical_to_mesh_axes(('batch', 'embed', 'mlp'), rules)
P('data', 'model', None)
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import enum
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from linen.core import struct
from linen.core.config import config
from linen.core.errors import LogicalAxisRulesError
from linen.core.meta import (
    Partitioned,
    constrain,
    current_variable_path,
    get_global_mesh,
    global_mesh_defined,
)
from linen.core.meta import _mesh_axes_of as _mesh_axes_of

__all__ = [
    'LogicalAxisRulesWarning',
    'LogicallyPartitioned',
    'RulesFallback',
    'get_logical_axis_rules',
    'logical_axis_rules',
    'logical_to_mesh',
    'logical_to_mesh_axes',
    'logical_to_mesh_sharding',
    'set_logical_axis_rules',
    'strict_logical_rules',
    'with_logical_constraint',
    'with_logical_partitioning',
]

LogicalRules = Sequence[tuple[str, str | tuple[str, ...] | None]]


class LogicalAxisRulesWarning(UserWarning):
    """Kept so that ``warnings.filterwarnings(..., LogicalAxisRulesWarning)`` still imports.

    Rule problems are no longer warned about: outside strict mode they pass silently,
    as in Flax; strict mode raises :class:`~linen.core.errors.LogicalAxisRulesError`.
    """


class _RuleState(NamedTuple):
    rules: tuple
    strict: bool | None  # None: follow the config flag


_RULES: contextvars.ContextVar[_RuleState] = contextvars.ContextVar(
    'linen_logical_axis_rules',
    default=_RuleState((), None),  # noqa: B039 (a NamedTuple of tuples is immutable)
)

# Marks a dimension no rule has decided yet (None already means "replicated").
_UNASSIGNED = object()


class RulesFallback(enum.Enum):
    """What a constraint does with a logical dimension that no rule assigns."""

    AXIS_IS_UNSHARDED = 'axis_is_unsharded'
    RAISE_ERROR = 'raise_error'
    NO_CONSTRAINT = 'no_constraint'


def _freeze_rules(rules: LogicalRules) -> tuple:
    # Rules end up in pytree metadata and jit cache keys, so they must hash.
    if not isinstance(rules, (tuple, list)):
        raise LogicalAxisRulesError(
            f'Logical axis rules must be a list or tuple of (logical_name, mesh_axes) '
            f'pairs; got {type(rules).__name__}.'
        )
    return tuple((name, tuple(axes) if isinstance(axes, list) else axes) for name, axes in rules)


def strict_logical_rules() -> bool:
    """Whether rule problems raise here: ``strict=`` of the rules context, else the flag."""
    strict = _RULES.get().strict
    return config.linen_strict_logical_rules if strict is None else strict


def _where(path: str | None) -> str:
    path = path or current_variable_path()
    return f' at "{path}"' if path else ''


def set_logical_axis_rules(rules: LogicalRules, strict: bool | None = None) -> None:
    """Sets the logical axis rules of the current context.

    Args:
        rules: ``[(logical_name, mesh_axes), ...]``, tried in order.
        strict: raise on rule problems; ``None`` follows ``linen_strict_logical_rules``.
    """
    frozen = _freeze_rules(rules)
    _RULES.set(_RuleState(frozen, strict))


def get_logical_axis_rules() -> tuple:
    """Returns the logical axis rules of the current context (``()`` if none)."""
    return _RULES.get().rules


@contextlib.contextmanager
def logical_axis_rules(rules: LogicalRules, strict: bool | None = None) -> Iterator[None]:
    """Sets the logical axis rules inside a ``with`` block, restoring the old ones after.

    Args:
        rules: ``[(logical_name, mesh_axes), ...]``, tried in order.
        strict: raise :class:`LogicalAxisRulesError` on rule problems instead of
            warning; ``None`` follows the ``linen_strict_logical_rules`` flag.
    """
    frozen = _freeze_rules(rules)
    token = _RULES.set(_RuleState(frozen, strict))
    try:
        yield
    finally:
        _RULES.reset(token)


def _check_rules_for(name: str, rules: tuple, path: str | None) -> None:
    """Strict mode: duplicate or conflicting rules for ``name`` raise.

    A rule set is only checked when it is applied to an array that uses the logical
    name, so the report can name the parameter path as well as the axis.
    """
    mine = [axes for logical, axes in rules if logical == name]
    if len(mine) < 2:
        return
    first = mine[0]
    for axes in mine[1:]:
        if axes == first:
            raise LogicalAxisRulesError(
                f'Duplicate logical axis rule {(name, axes)} for logical axis {name!r}'
                f'{_where(path)} in {rules}; the second copy can never apply. Remove it.'
            )
        else:
            # A later rule for the same name is Flax's fallback (used when the first
            # rule's mesh axis is taken); strict mode forbids it as ambiguous.
            raise LogicalAxisRulesError(
                f'Conflicting logical axis rules for {name!r}{_where(path)}: '
                f'{(name, first)} and {(name, axes)} (strict mode allows one rule per '
                'logical name). Keep one, or leave strict mode to use the later one as a '
                'fallback.'
            )


def _assign(names: tuple, rules: tuple, path: str | None) -> list:
    """One mesh assignment per dimension, ``_UNASSIGNED`` where no rule applied."""
    path = path or current_variable_path()
    counts = collections.Counter(n for n in names if isinstance(n, str))
    dups = tuple(n for n, c in counts.items() if c > 1)
    if dups:
        # Flax's ValueError and its words first; a name used twice cannot be sharded twice.
        raise LogicalAxisRulesError(
            f'Unsupported: Dimensions {dups} occur more than once in array names. '
            f'The names are {names}{_where(path)}; give each dimension its own logical name.'
        )
    strict = strict_logical_rules()
    if strict:
        for name in counts:
            _check_rules_for(name, rules, path)
    result: list[Any] = [_UNASSIGNED if isinstance(n, str) else n for n in names]
    used: dict[str, str] = {}  # mesh axis -> the logical name that took it
    blocked: dict[str, tuple] = {}  # logical name -> (mesh axis, the name holding it)
    for logical, axes in rules:
        if logical not in counts:
            continue
        i = names.index(logical)
        if result[i] is not _UNASSIGNED:
            continue
        mesh_axes = _mesh_axes_of(axes)
        taken = [a for a in mesh_axes if a in used]
        if taken:
            blocked.setdefault(logical, (taken[0], used[taken[0]]))
            continue
        result[i] = axes
        used.update(dict.fromkeys(mesh_axes, logical))
    if not strict:
        return result
    ruled = {logical for logical, _ in rules}
    for name in counts:
        if name not in ruled and rules:
            raise LogicalAxisRulesError(
                f'Logical axis {name!r}{_where(path)} (names {names}) is mapped by no rule '
                f'in {rules}; outside strict mode it is replicated. Add a rule '
                f'({name!r}, mesh_axis), or ({name!r}, None) to replicate it on purpose.'
            )
    if path:
        for name, (axis, holder) in blocked.items():
            if result[names.index(name)] is _UNASSIGNED:
                # Flax replicates the later dimension silently. Activations rely on it
                # (FSDP: the batch and the embedding both over 'data'), so only a
                # parameter (an array with a path) is held to it in strict mode.
                raise LogicalAxisRulesError(
                    f'Logical axes {holder!r} and {name!r}{_where(path)} (names {names}) '
                    f'are both mapped to mesh axis {axis!r}; a mesh axis shards one '
                    f'dimension, so {name!r} would be replicated. Map {name!r} to another '
                    f'mesh axis, or to None to replicate it on purpose.'
                )
    return result


def _check_mesh_axes(
    spec: PartitionSpec, mesh: Any, path: str | None, names: tuple
) -> PartitionSpec:
    """``spec``, after checking that the mesh has every mesh axis it names.

    Flax raises JAX's ``ValueError`` here in every mode (a parameter meant to be
    sharded must not silently be replicated); linen raises the same text first, then
    the parameter path, the logical axis and the rule.
    """
    path = path or current_variable_path()
    if mesh is None:
        return spec
    known = set(mesh.axis_names)
    for logical, entry in zip(names, spec, strict=False):
        missing = [a for a in _mesh_axes_of(entry) if a not in known]
        if missing:
            axis = missing[0]
            raise LogicalAxisRulesError(
                f'Resource axis: {axis} of {spec} is not found in mesh: '
                f'{tuple(mesh.axis_names)}. Mesh axis {axis!r} comes from the rule '
                f'({logical!r}, {entry!r}) for logical axis {logical!r}{_where(path)} '
                f'(names {names}). Fix the rule, or add {axis!r} to the mesh.'
            )
    return spec


def _check_rank(names: tuple, shape: tuple | None) -> None:
    """In strict mode, raises when the names and the array differ in rank.

    Outside it the spec goes to JAX as Flax sends it: a shorter one leaves the
    trailing dimensions replicated, a longer one is JAX's error.
    """
    if shape is None or len(names) == len(shape) or not strict_logical_rules():
        return
    raise LogicalAxisRulesError(
        f'Logical names {names}{_where(None)} have {len(names)} entries but the array has '
        f'shape {tuple(shape)} (rank {len(shape)}). Give one name (or None) per dimension.'
    )


def logical_to_mesh_axes(
    array_dim_names: Sequence[str | None] | None,
    rules: LogicalRules | None = None,
    *,
    path: str | None = None,
) -> PartitionSpec | None:
    """Maps logical dimension names to a mesh ``PartitionSpec`` with ``rules``.

    Args:
        array_dim_names: one logical name (or ``None``) per dimension; ``None``
            altogether gives ``None``. ``PartitionSpec.UNCONSTRAINED`` passes through.
        rules: the rules; ``None`` uses the context's rules.
        path: where the names come from, for error messages.
    """
    if array_dim_names is None:
        return None
    rules = get_logical_axis_rules() if rules is None else _freeze_rules(rules)
    result = _assign(tuple(array_dim_names), rules, path)
    return PartitionSpec(*(None if r is _UNASSIGNED else r for r in result))


def _is_spec(x: Any) -> bool:
    return isinstance(x, PartitionSpec)


def _path_text(key_path) -> str:
    return '/'.join(
        str(getattr(k, 'key', getattr(k, 'name', getattr(k, 'idx', k)))) for k in key_path
    )


def logical_to_mesh(tree: Any, rules: LogicalRules | None = None) -> Any:
    """Maps every logical ``PartitionSpec`` in ``tree`` to a mesh ``PartitionSpec``."""
    return jax.tree_util.tree_map_with_path(
        lambda kp, spec: (
            logical_to_mesh_axes(tuple(spec), rules, path=_path_text(kp))
            if _is_spec(spec)
            else spec
        ),
        tree,
        is_leaf=_is_spec,
    )


def logical_to_mesh_sharding(tree: Any, mesh: Mesh, rules: LogicalRules | None = None) -> Any:
    """Maps every logical ``PartitionSpec`` in ``tree`` to a ``NamedSharding`` on ``mesh``.

    Problems are reported with the tree path of the spec (``params/Dense_0/kernel``).
    """

    def one(kp, spec):
        if not _is_spec(spec):
            return spec
        path = _path_text(kp)
        mesh_spec = logical_to_mesh_axes(tuple(spec), rules, path=path)
        mesh_spec = _check_mesh_axes(mesh_spec, mesh, path, tuple(spec))
        return NamedSharding(mesh, mesh_spec)

    return jax.tree_util.tree_map_with_path(one, tree, is_leaf=_is_spec)


def _constrain_one(
    spec: Any,
    x: Any,
    *,
    rules: tuple,
    mesh: Mesh | None,
    fallback: RulesFallback,
    context_mesh: Any,
) -> Any:
    if spec is None:
        return x
    names = tuple(spec)
    _check_rank(names, getattr(x, 'shape', None))
    assigned = _assign(names, rules, None)
    if any(a is _UNASSIGNED for a in assigned):
        if fallback == RulesFallback.RAISE_ERROR:
            unmatched = [n for n, a in zip(names, assigned) if a is _UNASSIGNED]
            raise LogicalAxisRulesError(
                f'Axis names {names} did not match a rule (unmatched: {unmatched})'
                f'{_where(None)}; the rules are {rules}. Add one or use '
                'fallback=RulesFallback.AXIS_IS_UNSHARDED.'
            )
        if fallback == RulesFallback.NO_CONSTRAINT:
            return x
    mesh_spec = PartitionSpec(*(None if a is _UNASSIGNED else a for a in assigned))
    mesh_spec = _check_mesh_axes(mesh_spec, mesh if mesh is not None else context_mesh, None, names)
    return constrain(x, mesh_spec, mesh)


def _is_logical_spec(x: Any) -> bool:
    return x is None or (
        isinstance(x, (tuple, PartitionSpec))
        and all(e is None or isinstance(e, str) or e is PartitionSpec.UNCONSTRAINED for e in x)
    )


def with_logical_constraint(
    x: Any,
    logical_axis_resources: Any,
    rules: LogicalRules | None = None,
    mesh: Mesh | None = None,
    fallback: RulesFallback = RulesFallback.AXIS_IS_UNSHARDED,
) -> Any:
    """``jax.lax.with_sharding_constraint`` with logical names mapped by the rules.

    As in Flax, with no rules (in context or passed) or with no mesh (passed, or
    from ``jax.set_mesh``/``with mesh:``), ``x`` is returned unchanged, so layers can
    call this unconditionally; in strict mode rules without a mesh raise instead,
    since the constraint the user asked for would be dropped. Under a mesh
    with ``Explicit`` axes the value is resharded (``jax.sharding.reshard``).

    Args:
        x: an array (or pytree of arrays).
        logical_axis_resources: a logical ``PartitionSpec`` or tuple of names (or a
            pytree of them matching ``x``).
        rules: the rules; ``None`` uses the context's rules.
        mesh: the mesh; ``None`` uses the context mesh.
        fallback: what to do with a logical name that no rule assigns.
    """
    rules = get_logical_axis_rules() if rules is None else _freeze_rules(rules)
    if not rules or logical_axis_resources is None:
        return x
    context_mesh = get_global_mesh() if mesh is None else None
    if mesh is None and context_mesh is None:
        if strict_logical_rules():
            raise LogicalAxisRulesError(
                f'with_logical_constraint was called with logical axis rules but no mesh '
                f'(names {logical_axis_resources}{_where(None)}): there is nothing to '
                'constrain to, so outside strict mode the constraint is dropped. Pass '
                'mesh=..., or run under `with jax.set_mesh(mesh):`.'
            )
        return x
    one = functools.partial(
        _constrain_one, rules=rules, mesh=mesh, fallback=fallback, context_mesh=context_mesh
    )
    if _is_logical_spec(logical_axis_resources):
        return jax.tree_util.tree_map(lambda leaf: one(logical_axis_resources, leaf), x)
    return jax.tree_util.tree_map(one, logical_axis_resources, x, is_leaf=_is_logical_spec)


class LogicallyPartitioned(Partitioned):
    """A :class:`~linen.core.meta.Partitioned` whose names are logical.

    ``get_partition_spec`` returns the logical spec (as in Flax; map it with
    ``logical_to_mesh``); ``get_sharding`` and ``unbox`` map the names with
    ``rules``, or the context's rules when ``rules`` is ``None``.
    """

    rules: tuple | None = struct.field(pytree_node=False, default=None)

    def __post_init__(self):
        super().__post_init__()
        if self.rules is not None:
            object.__setattr__(self, 'rules', _freeze_rules(self.rules))

    def get_mesh_partition_spec(self) -> PartitionSpec:
        """The mesh ``PartitionSpec`` the logical names map to under the rules."""
        return logical_to_mesh_axes(self.names, self.rules)

    def get_sharding(self, mesh: Mesh | None = None) -> NamedSharding:
        mesh = self.mesh if self.mesh is not None else mesh
        if mesh is None:
            raise ValueError(
                f'LogicallyPartitioned value with names {self.names} has no mesh: pass '
                'one to `get_sharding(mesh)` or to `with_logical_partitioning(..., mesh=...)`.'
            )
        _check_rank(self.names, getattr(self.value, 'shape', None))
        spec = self.get_mesh_partition_spec()
        spec = _check_mesh_axes(spec, mesh, None, self.names)
        return NamedSharding(mesh, spec)

    def unbox(self, apply_constraint: bool = True) -> Any:
        if apply_constraint and (self.mesh is not None or global_mesh_defined()):
            return with_logical_constraint(
                self.value, self.get_partition_spec(), rules=self.rules, mesh=self.mesh
            )
        return self.value


def with_logical_partitioning(
    fn: Callable[..., Any],
    names: tuple,
    mesh: Mesh | None = None,
    rules: LogicalRules | None = None,
) -> Callable[..., LogicallyPartitioned]:
    """Wraps an initializer so that its output is boxed in :class:`LogicallyPartitioned`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return LogicallyPartitioned(fn(*args, **kwargs), names, mesh=mesh, rules=rules)

    return wrapper
