"""``tabulate``: Flax's summary table (``nn.tabulate``, ``Module.tabulate``).

The calls are recorded while ``init`` runs abstractly (``jax.eval_shape``:
nothing is computed) with recording switched on in the current context
(``_recording.py``, a ContextVar: concurrent calls do not mix). Variables are
counted from what ``init`` returns. FLOPs, when asked for, come from
:func:`module_costs` of one compiled ``apply`` (and, for ``vjp_flops``, of its
gradient), joined on the label path each call ran under (``_tabulate_flops.py``);
nothing compiles unless they are asked for. A call whose FLOPs cannot be known shows ``n/a``
and the caption says why: never a silent 0.

A model whose collectives name an axis bound outside it (``lax.psum(x, 'i')``
in a model meant to run under ``jax.pmap(..., axis_name='i')`` or
``shard_map``) is tabulated with that axis bound by ``jax.vmap`` over one
device (``axis_size=1``): shapes are per device, as inside ``pmap``, and the
caption says so. With ``show_sharding`` the table gains the layout of each
parameter on the mesh (``_sharding.py``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from linen.core import DenyList
from linen.profiling._cell_text import arguments_lines, as_lines, cell_lines
from linen.profiling._recording import Call, recording
from linen.profiling._report import bytes_text as _bytes_text
from linen.profiling._sharding import (
    Layout,
    check_replicated,
    context_mesh,
    parameter_layouts,
    sharding_cells,
)
from linen.profiling._tabulate_flops import Flops, count_flops

__all__ = ['tabulate']

_DEFAULT_MUTABLE = DenyList('intermediates')
# The dtype of a ``float32[2,3]`` shape text (``key<fry>[]`` too), dimmed as Flax does.
_DTYPE = r'(?<![^\s(])[A-Za-z_][\w<>]*(?=\[[0-9,]*\])'
# A row names its method unless it is one of these (Flax's rule).
_UNSHOWN_METHODS = frozenset({'__call__', '<lambda>'})


# collection -> (own variables [(name, its lines in the cell)], count, bytes)
Variables = dict[str, tuple[list[tuple[str, list[str]]], int, int]]


@dataclass
class _Row:
    call: Call
    # the count is inclusive of hidden submodules when the row sits at ``depth``
    variables: Variables = field(default_factory=dict)
    flops: str = ''
    vjp_flops: str = ''
    layouts: list[tuple[str, Layout]] = field(default_factory=list)


def _node(variables: Mapping, collection: str, path: tuple[str, ...]) -> Mapping | None:
    node: Any = variables.get(collection)
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Mapping) else None


def _size(value: Any) -> tuple[int, int]:
    """Count and bytes of the arrays in ``value`` (a variable: an array, a box, a tuple...)."""
    import jax

    count = size = 0
    for leaf in jax.tree_util.tree_leaves(value):
        if hasattr(leaf, 'shape') and hasattr(leaf, 'dtype'):
            n = 1
            for d in leaf.shape:
                n *= int(d)
            count, size = count + n, size + n * leaf.dtype.itemsize
    return count, size


def _subtree_size(node: Any) -> tuple[int, int]:
    if isinstance(node, Mapping):
        count = size = 0
        for value in node.values():
            c, s = _subtree_size(value)
            count, size = count + c, size + s
        return count, size
    return _size(node)


def _collections(variables: Mapping, calls: list[Call] | None = None) -> list[str]:
    """Collections in the order the calls first hold a variable of them (Flax's order)."""
    order: dict[str, None] = {}
    for call in calls or ():
        for collection in sorted(variables):
            node = _node(variables, collection, call.path)
            if node is not None and any(not isinstance(v, Mapping) for v in node.values()):
                order.setdefault(collection, None)
    for collection in sorted(variables):
        order.setdefault(collection, None)
    return list(order)


def _variables_of(variables: Mapping, path: tuple[str, ...], summarize: bool) -> Variables:
    """The variables a module at ``path`` holds itself, per collection.

    Any value is listed (Flax lists sown tuples, Python scalars and ``None``
    too); arrays count. With ``summarize`` the count includes the submodules'.
    """
    result = {}
    for collection in _collections(variables):
        node = _node(variables, collection, path)
        if node is None:
            continue
        listed, count, size = [], 0, 0
        for name, value in node.items():
            if isinstance(value, Mapping):
                if summarize:
                    c, s = _subtree_size(value)
                    count, size = count + c, size + s
                continue
            listed.append((name, as_lines({name: value})))
            c, s = _size(value)
            count, size = count + c, size + s
        if listed or count:
            result[collection] = (sorted(listed), count, size)
    return result


_UNBOUND_AXIS = re.compile(r'unbound axis name: ([^\s.,]+)')


def _bind_axes(fn: Callable, axis_names: list[str]) -> Callable:
    """``fn`` with each collective axis name bound by a ``vmap`` of size 1 (outputs: axis 0)."""
    import jax

    for name in axis_names:
        fn = jax.vmap(fn, in_axes=None, out_axes=0, axis_size=1, axis_name=name)
    return fn


def _unbatch(tree: Any, count: int) -> Any:
    """Shapes of ``tree`` without the ``count`` leading size-1 axes :func:`_bind_axes` added."""
    import jax

    if not count:
        return tree
    return jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct(s.shape[count:], s.dtype), tree)


def _init_abstractly(init: Callable, rngs: Any) -> tuple[dict, list[Call], list[str]]:
    """Variables (shapes) and recorded calls of ``init(rngs)``, and the axes bound for it.

    Collectives over an axis bound outside the model (pmap, shard_map) raise
    NameError when traced alone; such axes are bound over one device.
    """
    import jax

    axis_names: list[str] = []
    while True:
        try:
            with recording() as records:
                variables = jax.eval_shape(_bind_axes(init, axis_names), rngs)
            break
        except NameError as error:
            match = _UNBOUND_AXIS.search(str(error))
            if match is None or match.group(1) in axis_names or len(axis_names) >= 8:
                raise
            axis_names.append(match.group(1))
    return dict(_unbatch(variables, len(axis_names))), records, axis_names


def _layouts(
    variables: Mapping, mesh: Any, replicated_tolerance: float
) -> tuple[dict[str, Layout], list[str]]:
    """Each parameter's layout on ``mesh`` (or the context mesh), and notes on it."""
    mesh = mesh if mesh is not None else context_mesh()
    layouts = parameter_layouts(variables, mesh)
    if mesh is None:
        return layouts, [
            'sharding: no mesh (pass mesh= or call under jax.set_mesh / with mesh:), '
            'so bytes per device and replication are n/a'
        ]
    devices = 1
    for size in dict(mesh.shape).values():
        devices *= size
    check_replicated(layouts, devices, replicated_tolerance)
    unknown = {axis: path for path, layout in layouts.items() for axis in layout.unknown_axes}
    if not unknown:
        return layouts, []
    named = ', '.join(f'{axis!r} (e.g. {path})' for axis, path in unknown.items())
    return layouts, [
        f'sharding: mesh axes {named} are not axes of the mesh '
        f'{tuple(dict(mesh.shape))}; counted as not splitting'
    ]


def _rows(
    records: list[Call],
    variables: Mapping,
    *,
    depth: int | None,
    show_repeated: bool,
    layouts: Mapping[str, Layout],
    flops: Flops | None,
    forward: bool,
    vjp: bool,
) -> tuple[list[_Row], bool, bool]:
    """One row per call shown, whether a FLOPs cell had no instruction to count, and
    whether calls of one instance with different inputs show their FLOPs together."""
    rows: list[_Row] = []
    seen: set[tuple[str, ...]] = set()
    missing_flops = shared_flops = False
    # Label paths whose calls all took the same inputs: they do the same work.
    inputs: dict[str, set[str]] = {}
    for call in records:
        inputs.setdefault(call.label_path, set()).add(repr(call.inputs))
    uniform = {path for path, seen_inputs in inputs.items() if len(seen_inputs) == 1}
    for call in records:
        if depth is not None and len(call.path) > depth:
            continue
        repeated = call.path in seen
        if repeated and not show_repeated:
            continue
        seen.add(call.path)
        at_limit = depth is not None and len(call.path) == depth
        row = _Row(call=call)
        if not repeated:
            row.variables = _variables_of(variables, call.path, summarize=at_limit)
            prefix = '/'.join(call.path)
            for name, _ in row.variables.get('params', ([], 0, 0))[0]:
                key = f'{prefix}/{name}' if prefix else name
                if key in layouts:
                    row.layouts.append((name, layouts[key]))
        if flops is not None:
            for column, table, traced, enabled in (
                ('flops', flops.flops, flops.flops_traced, forward),
                ('vjp_flops', flops.vjp_flops, flops.vjp_flops_traced, vjp),
            ):
                if not enabled:
                    continue
                if column in flops.failed:
                    text = 'n/a'
                elif call.label_path in table:
                    total = table[call.label_path]
                    calls = traced.get(call.label_path, {})
                    if len(calls) > 1 and call.label_path in uniform:
                        # Calls alike: each call's share, as Flax counts one call.
                        total /= len(calls)
                    elif len(calls) > 1:
                        shared_flops = True
                    text = f'{total:,.0f}'.replace(',', '')
                elif call.label_path not in traced:
                    text = '0'  # the call bound no operation: no work (as Flax counts it)
                else:
                    text, missing_flops = 'n/a', True
                setattr(row, column, text)
        rows.append(row)
    return rows, missing_flops, shared_flops


def _summarize(
    module: Any,
    rngs: Any,
    args: tuple,
    kwargs: dict,
    *,
    depth: int | None,
    show_repeated: bool,
    mutable: Any,
    compute_flops: bool,
    compute_vjp_flops: bool,
    init_kwargs: Mapping[str, Any],
    show_sharding: bool = False,
    mesh: Any = None,
    replicated_tolerance: float = 0.1,
) -> tuple[list[_Row], Mapping, list[str]]:
    call_kwargs = dict(kwargs)
    extra = dict(init_kwargs)
    if 'method' in call_kwargs:
        extra['method'] = call_kwargs.pop('method')

    def init(r):
        return module.init(r, *args, mutable=mutable, **extra, **call_kwargs)

    variables, records, axis_names = _init_abstractly(init, rngs)
    notes: list[str] = []
    if axis_names:
        notes.append(
            f'collectives over axis {", ".join(map(repr, axis_names))} (bound outside the '
            f'model, by pmap or shard_map) ran over one device: shapes and FLOPs are per device'
        )

    flops = None
    if compute_flops or compute_vjp_flops:

        def unbound_apply(v, *a):
            # Every collection mutable, so modules that update state (counters,
            # batch statistics) run as they do in training.
            apply_kwargs = {k: val for k, val in extra.items() if k == 'method'}
            streams = rngs if isinstance(rngs, Mapping) else {'params': rngs}
            return module.apply(v, *a, mutable=True, rngs=streams, **apply_kwargs, **call_kwargs)

        apply = _bind_axes(unbound_apply, axis_names)
        flops, flops_notes = count_flops(
            apply, variables, args, forward=compute_flops, vjp=compute_vjp_flops
        )
        notes.extend(flops_notes)

    layouts: dict[str, Layout] = {}
    if show_sharding:
        layouts, sharding_notes = _layouts(variables, mesh, replicated_tolerance)
        notes.extend(sharding_notes)

    rows, missing_flops, shared_flops = _rows(
        records,
        variables,
        depth=depth,
        show_repeated=show_repeated,
        layouts=layouts,
        flops=flops,
        forward=compute_flops,
        vjp=compute_vjp_flops,
    )
    if shared_flops:
        notes.append(
            'calls of one module instance with different inputs share its label: each of '
            'their rows shows the FLOPs of all of them'
        )
    if missing_flops:
        notes.append(
            'n/a: no instruction of that call is left in the optimized program '
            '(its work was removed as unused or merged into another call)'
        )
    return rows, variables, notes


def _render(
    title: str,
    rows: list[_Row],
    variables: Mapping,
    notes: list[str],
    *,
    compute_flops: bool,
    compute_vjp_flops: bool,
    show_sharding: bool = False,
    mesh_known: bool = True,
    console_kwargs: Mapping[str, Any] | None,
    table_kwargs: Mapping[str, Any],
    column_kwargs: Mapping[str, Any],
) -> str:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    collections = _collections(variables, [row.call for row in rows])
    totals = {c: _subtree_size(variables[c]) for c in collections}
    count = sum(c for c, _ in totals.values())
    size = sum(s for _, s in totals.values())
    caption = Text('\nTotal Parameters: ', style='bold')
    if count:  # (Flax leaves the total blank when nothing counts)
        caption.append(f'{count:,} ')
        caption.append(f'({_bytes_text(size)})', style='dim')
    if notes:
        caption.append('\n' + '\n'.join(notes), style='not bold')
    table = Table(
        title=title,
        title_style='italic',
        caption=caption,
        caption_style='bold',
        show_header=True,
        show_lines=True,
        **dict(table_kwargs),
    )
    headers = ['path', 'module', 'inputs', 'outputs']
    if compute_flops:
        headers.append('flops')
    if compute_vjp_flops:
        headers.append('vjp_flops')
    if show_sharding:
        headers.extend(['logical axes', 'mesh spec', 'bytes/device', 'replication'])
    for header in [*headers, *collections]:
        table.add_column(header, **dict(column_kwargs))

    def shapes_text(lines: list[str]) -> Text:
        text = Text()
        for index, line in enumerate(lines):
            if index:
                text.append('\n')
            text.append(line)
        text.highlight_regex(_DTYPE, style='dim')  # Flax dims the dtype of ``float32[2,3]``
        return text

    def count_text(n: int, nbytes: int) -> Text:
        text = Text()
        if n:  # (Flax leaves the count blank when nothing counts)
            text.append(f'{n:,} ', style='bold')
            text.append(f'({_bytes_text(nbytes)})', style='bold dim')
        return text

    for row in rows:
        call = row.call
        suffix = '' if call.method_name in _UNSHOWN_METHODS else f' ({call.method_name})'
        cells: list[Any] = [
            '/'.join(call.path),
            call.module_type + suffix,
            shapes_text(arguments_lines(*call.inputs)),
            shapes_text(cell_lines(call.outputs)),
        ]
        if compute_flops:
            cells.append(row.flops)
        if compute_vjp_flops:
            cells.append(row.vjp_flops)
        if show_sharding:
            cells.extend(sharding_cells(row.layouts, mesh_known))
        for collection in collections:
            entry = row.variables.get(collection)
            if entry is None:
                cells.append('')
                continue
            listed, n, nbytes = entry
            text = shapes_text([line for _, lines in listed for line in lines])
            if listed:
                text.append('\n\n')
            text.append_text(count_text(n, nbytes))
            cells.append(text)
        table.add_row(*cells)
    total_cells: list[Any] = [''] * (len(headers) - 1) + [Text('Total', justify='right')]
    for collection in collections:
        total_cells.append(count_text(*totals[collection]))
    table.add_row(*total_cells, style='bold')
    buffer = io.StringIO()
    # Styled as on a terminal unless the caller says otherwise (Flax's default).
    console = {'force_terminal': True, 'force_jupyter': False, **dict(console_kwargs or {})}
    Console(file=buffer, **console).print(table)
    return '\n' + buffer.getvalue() + '\n'


def tabulate(
    module: Any,
    rngs: Any,
    depth: int | None = None,
    show_repeated: bool = False,
    mutable: Any = _DEFAULT_MUTABLE,
    console_kwargs: Mapping[str, Any] | None = None,
    table_kwargs: Mapping[str, Any] = MappingProxyType({}),
    column_kwargs: Mapping[str, Any] = MappingProxyType({}),
    compute_flops: bool = False,
    compute_vjp_flops: bool = False,
    show_sharding: bool = False,
    mesh: Any = None,
    replicated_tolerance: float = 0.1,
    **kwargs: Any,
) -> Callable[..., str]:
    """A function that returns the summary table of ``module`` called on its arguments.

    Flax's ``nn.tabulate``: one row per method call (path, module, input and
    output shapes, and, per collection, the variables the module holds with
    their count and bytes), a totals row and the total parameter count.

    Args:
      module: the Module to summarize.
      rngs: the rngs for ``module.init`` (a key or a dict of keys).
      depth: show calls at most this many levels below the root (``None``: all);
        a row at the limit counts the variables of the submodules it hides.
      show_repeated: show every call of a module, not only its first.
      mutable: the collections ``init`` may create (Flax's default: all but
        ``intermediates``).
      console_kwargs: keyword arguments of ``rich.console.Console`` (``width``...);
        by default the table is styled as for a terminal (``force_terminal=True``),
        as Flax's; ``{'force_terminal': False}`` gives plain text.
      table_kwargs: keyword arguments of ``rich.table.Table``.
      column_kwargs: keyword arguments of ``Table.add_column``.
      compute_flops: add a ``flops`` column: the FLOPs of each call, submodules
        included, from one compiled ``apply`` (nothing compiles without it).
      compute_vjp_flops: add a ``vjp_flops`` column: the FLOPs of each call in
        ``jax.vjp`` of the call (forward pass, then the backward pass with
        respect to the variables and the inputs).
      show_sharding: add, for each parameter of a row, its logical axis names
        (``with_logical_partitioning``), its mesh ``PartitionSpec``, its bytes
        per device and its replication factor (devices holding the same
        shard), and warn with
        :class:`~linen.profiling.errors.ReplicatedParametersWarning` when
        parameters split over no mesh axis exceed ``replicated_tolerance``.
      mesh: the mesh for ``show_sharding`` (default: the box's own mesh, then
        the context mesh of ``jax.set_mesh`` or ``with mesh:``).
      replicated_tolerance: the share of parameter bytes that may be fully
        replicated before the warning.
      **kwargs: keyword arguments of ``module.init`` (``method=``...).

    Returns:
      ``fn(*args, **kwargs) -> str``: the table for a call with those arguments.
      A FLOPs cell that cannot be known shows ``n/a`` and the caption says why.

    >>> import jax, jax.numpy as jnp
    >>> import linen.nn as nn
    >>> plain = {'force_terminal': False}  # default: styled as for a terminal, as Flax
    >>> table = tabulate(nn.Dense(3), jax.random.key(0), console_kwargs=plain)(jnp.ones((2, 4)))
    >>> 'Total Parameters: 15 (60 B)' in table
    True
    """

    def table_for(*args: Any, **call_kwargs: Any) -> str:
        rows, variables, notes = _summarize(
            module,
            rngs,
            args,
            call_kwargs,
            depth=depth,
            show_repeated=show_repeated,
            mutable=mutable,
            compute_flops=compute_flops,
            compute_vjp_flops=compute_vjp_flops,
            init_kwargs=kwargs,
            show_sharding=show_sharding,
            mesh=mesh,
            replicated_tolerance=replicated_tolerance,
        )
        mesh_known = not any(note.startswith('sharding: no mesh') for note in notes)
        return _render(
            f'{type(module).__name__} Summary',
            rows,
            variables,
            notes,
            compute_flops=compute_flops,
            compute_vjp_flops=compute_vjp_flops,
            show_sharding=show_sharding,
            mesh_known=mesh_known,
            console_kwargs=console_kwargs,
            table_kwargs=table_kwargs,
            column_kwargs=column_kwargs,
        )

    return table_for
