"""``module_memory``: bytes of parameters, gradients, optimizer state and other state per module.

Everything here is counted from array sizes (shape times item size), nothing is
compiled or run: the variables a model holds, one gradient per floating-point
parameter (``jax.grad`` returns one array of the parameter's shape and dtype),
and the optimizer state. An optax state stores, per moment, a tree shaped like
the parameters (Adam's ``mu`` and ``nu``); each such tree is matched to the
parameters by structure and its leaves are attributed to their module paths.
Optimizer leaves of another shape (Adam's step ``count``) are not any module's:
they go to path ``''``.

Activations are the exception: what the forward pass keeps for the backward
pass is only known from a compiled program, so it comes from
:func:`~linen.profiling.saved_activations` and is passed in (``activations=``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from linen.profiling._report import format_table, human
from linen.profiling._tree import PathRows, indented_name, tree_rows

__all__ = ['MemoryRow', 'ModuleMemory', 'module_memory']

_FIELDS = ('params', 'grads', 'optimizer', 'state', 'activations')


@dataclass(frozen=True)
class MemoryRow:
    """Bytes held for one module path (own, and ``inclusive_*`` with its submodules).

    ``params``: the ``params`` collection; ``grads``: one gradient per
    floating-point parameter; ``optimizer``: the optimizer-state leaves that
    mirror this module's parameters; ``state``: every other collection
    (``batch_stats``, caches, counters); ``activations``: bytes the forward
    pass keeps for the backward pass (``None`` when no ``activations=`` was
    given to :func:`module_memory`: not measured, not zero).
    """

    path: str
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    state_bytes: int
    inclusive_params_bytes: int
    inclusive_grads_bytes: int
    inclusive_optimizer_bytes: int
    inclusive_state_bytes: int
    activations_bytes: int | None = None
    inclusive_activations_bytes: int | None = None

    @property
    def total_bytes(self) -> int:
        return _sum_of_fields(self, '')

    @property
    def inclusive_total_bytes(self) -> int:
        return _sum_of_fields(self, 'inclusive_')


@dataclass(frozen=True)
class ModuleMemory(PathRows):
    """What :func:`module_memory` returns: one row per module path, and the totals.

    ``activations_bytes`` and ``memory_analysis`` come from the
    :class:`~linen.profiling.SavedActivations` given (``None`` without one).
    """

    rows: tuple[MemoryRow, ...]
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    state_bytes: int
    activations_bytes: int | None = None
    memory_analysis: dict[str, int] | None = None

    @property
    def total_bytes(self) -> int:
        """Parameters, gradients, optimizer state, other state and saved activations."""
        return _sum_of_fields(self, '')

    def __str__(self) -> str:
        with_activations = self.activations_bytes is not None
        body = []
        for row in self.rows:
            name = indented_name(row.path)
            cells = [
                name,
                human(row.inclusive_params_bytes, 'B'),
                human(row.inclusive_grads_bytes, 'B'),
                human(row.inclusive_optimizer_bytes, 'B'),
                human(row.inclusive_state_bytes, 'B'),
            ]
            if with_activations:
                cells.append(human(row.inclusive_activations_bytes or 0, 'B'))
            body.append([*cells, human(row.inclusive_total_bytes, 'B')])
        cells = [
            'total',
            human(self.params_bytes, 'B'),
            human(self.grads_bytes, 'B'),
            human(self.optimizer_bytes, 'B'),
            human(self.state_bytes, 'B'),
        ]
        if with_activations:
            cells.append(human(self.activations_bytes, 'B'))
        body.append([*cells, human(self.total_bytes, 'B')])
        header = ['module', 'params', 'grads', 'optimizer', 'other state']
        if with_activations:
            header.append('activations')
        title = 'Memory per module (from array sizes)'
        if with_activations:
            title = 'Memory per module (activations from the compiled program, the rest from sizes)'
        return format_table(title, [*header, 'total'], body)


def _sum_of_fields(report: Any, prefix: str) -> int:
    """``params + grads + optimizer + state + activations`` bytes (unmeasured activations: 0)."""
    return sum(getattr(report, f'{prefix}{field}_bytes') or 0 for field in _FIELDS)


def _nbytes(leaf: Any) -> int:
    leaf = getattr(leaf, 'value', leaf) if not hasattr(leaf, 'shape') else leaf
    if not hasattr(leaf, 'shape') or not hasattr(leaf, 'dtype'):
        return 0
    count = 1
    for d in leaf.shape:
        count *= int(d)
    return count * leaf.dtype.itemsize


def _is_float(leaf: Any) -> bool:
    import jax.numpy as jnp

    leaf = getattr(leaf, 'value', leaf) if not hasattr(leaf, 'shape') else leaf
    return hasattr(leaf, 'dtype') and jnp.issubdtype(leaf.dtype, jnp.inexact)


def _leaves_by_path(tree: Any, prefix: tuple[str, ...] = ()):
    """``(module path, leaf)`` for a variables tree (the last key is the variable name)."""
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            if isinstance(value, Mapping):
                yield from _leaves_by_path(value, (*prefix, str(key)))
            else:
                yield '/'.join(prefix), value


def module_memory(
    variables: Mapping, opt_state: Any = None, *, activations: Any = None
) -> ModuleMemory:
    """Bytes of parameters, gradients, optimizer state, other state and activations per module.

    Args:
      variables: the model's variables (``model.init(...)`` or arrays'
        ``jax.ShapeDtypeStruct``s, e.g. from ``jax.eval_shape``).
      opt_state: an optax state for ``variables['params']`` (or ``None``).
      activations: a :class:`~linen.profiling.SavedActivations`
        (:func:`~linen.profiling.saved_activations` of the train step) for the
        activation bytes per module. Its label paths start with the root
        module's label (``'MLP/Dense_0'``); that first component is dropped to
        meet the variable paths (``'Dense_0'``), and the root module's own
        saved values, with those outside every module, go to path ``''``.

    Returns:
      A :class:`ModuleMemory`; paths are variable paths without the collection
      (``'Dense_0'``), ``''`` for what belongs to no module.

    >>> import jax, jax.numpy as jnp
    >>> params = {'Dense_0': {'kernel': jnp.ones((4, 8)), 'bias': jnp.ones(8)}}
    >>> module_memory({'params': params})['Dense_0'].grads_bytes
    160
    """
    import jax

    own: dict[str, list[float]] = {}

    def add(path: str, field: str, nbytes: int) -> None:
        own.setdefault(path, [0.0] * len(_FIELDS))[_FIELDS.index(field)] += nbytes

    params = variables.get('params', {})
    for collection, tree in variables.items():
        for path, leaf in _leaves_by_path(tree):
            if collection == 'params':
                add(path, 'params', _nbytes(leaf))
                if _is_float(leaf):
                    add(path, 'grads', _nbytes(leaf))
            else:
                add(path, 'state', _nbytes(leaf))
    if opt_state is not None:
        structure = jax.tree_util.tree_structure(params) if params else None

        def visit(node: Any) -> None:
            if structure is not None and _same_structure(node, structure):
                for path, leaf in _leaves_by_path(node):
                    add(path, 'optimizer', _nbytes(leaf))
                return
            children = _children(node)
            if children is None:
                add('', 'optimizer', _nbytes(node))
                return
            for child in children:
                visit(child)

        visit(opt_state)
    if activations is not None:
        for path, nbytes in activations.own.items():
            add(path.split('/', 1)[1] if '/' in path else '', 'activations', nbytes)
    rows = []
    for path, mine, total in tree_rows(own, len(_FIELDS)):
        measured = activations is not None
        rows.append(
            MemoryRow(
                path,
                *(int(v) for v in mine[:4]),
                *(int(v) for v in total[:4]),
                activations_bytes=int(mine[4]) if measured else None,
                inclusive_activations_bytes=int(total[4]) if measured else None,
            )
        )
    sums = [int(sum(values[i] for values in own.values())) for i in range(len(_FIELDS))]
    return ModuleMemory(
        tuple(rows),
        *sums[:4],
        activations_bytes=sums[4] if activations is not None else None,
        memory_analysis=getattr(activations, 'memory_analysis', None),
    )


def _same_structure(node: Any, structure: Any) -> bool:
    import jax

    if not isinstance(node, Mapping):
        return False
    return jax.tree_util.tree_structure(node) == structure


def _children(node: Any) -> list[Any] | None:
    """The sub-trees of a container (tuple, list, dict, namedtuple, optax state), else None."""
    import jax

    if isinstance(node, Mapping):
        return list(node.values())
    if isinstance(node, (tuple, list)):
        return list(node)
    leaves, treedef = jax.tree_util.tree_flatten(node, is_leaf=lambda x: x is not node)
    if treedef.num_leaves == 1 and leaves and leaves[0] is node:
        return None
    # A registered pytree node (optax's states): its direct children.
    children = jax.tree_util.tree_flatten(node, is_leaf=lambda x: x is not node)[0]
    return children if children and children[0] is not node else None
