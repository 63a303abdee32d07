"""``tabulate``: Flax's per-call summary table, from a method wrapper that records calls.

While the table is built a recording wrapper joins the dispatcher's chain (as a
plugin on ``linen_method_wrapper``, registered only for the duration): every
wrapped method call is recorded with its module path, class, method, input and
output shapes, and the label path it runs under. Parameters are counted from the
variables ``init`` returns (abstractly, with ``jax.eval_shape``: nothing is
computed), and FLOPs come from :func:`module_costs` of ``apply``, joined on the
label path.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from linen.core.hookspecs import hookimpl
from linen.profiling._naming import derive_profiling_name
from linen.profiling._report import format_table, human

__all__ = ['tabulate']

_records: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    'linen_tabulate_records', default=None
)
_label_stack: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    'linen_tabulate_labels', default=()
)


@dataclass
class _Call:
    path: tuple[str, ...]
    module_type: str
    method_name: str
    label_path: str
    inputs: Any
    outputs: Any = None


def _record(next_fn, args, kwargs, context):
    records = _records.get()
    if records is None:
        return next_fn(*args, **kwargs)
    module = context.module
    label = derive_profiling_name(module, context.method_name, context.method)
    labels = (*_label_stack.get(), label)
    path = tuple(getattr(module, 'path', None) or ())
    call = _Call(
        path=path,
        module_type=type(module).__name__,
        method_name=context.method_name,
        label_path='/'.join(labels),
        inputs=_shapes((args, kwargs) if kwargs else args),
    )
    records.append(call)
    token = _label_stack.set(labels)
    try:
        result = next_fn(*args, **kwargs)
    finally:
        _label_stack.reset(token)
    call.outputs = _shapes(result)
    return result


class _RecorderPlugin:
    @staticmethod
    @hookimpl(tryfirst=True)
    def linen_method_wrapper():
        return _record if _records.get() is not None else None


def _shapes(tree: Any) -> Any:
    import jax

    def leaf(x):
        if hasattr(x, 'shape') and hasattr(x, 'dtype'):
            return f'{x.dtype}[{",".join(str(d) for d in x.shape)}]'
        return x

    return jax.tree_util.tree_map(leaf, tree)


def _describe(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 1:
        value = value[0]
    if isinstance(value, tuple):
        return ', '.join(_describe(v) for v in value)
    if isinstance(value, Mapping):
        return '{' + ', '.join(f'{k}: {_describe(v)}' for k, v in value.items()) + '}'
    if isinstance(value, list):
        return '[' + ', '.join(_describe(v) for v in value) + ']'
    return str(value)


def _own_variables(variables: Mapping, path: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """Per collection: (count, bytes) of the variables stored directly at ``path``."""
    result = {}
    for collection, tree in variables.items():
        node: Any = tree
        for part in path:
            if not isinstance(node, Mapping) or part not in node:
                node = None
                break
            node = node[part]
        if not isinstance(node, Mapping):
            continue
        count = size = 0
        for value in node.values():
            if isinstance(value, Mapping):
                continue  # a submodule: its own row
            value = getattr(value, 'value', value)  # boxed metadata
            if hasattr(value, 'shape'):
                n = 1
                for d in value.shape:
                    n *= d
                count += n
                size += n * value.dtype.itemsize
        if count:
            result[collection] = (count, size)
    return result


def tabulate(
    module: Any,
    rngs: Any,
    *args: Any,
    depth: int | None = None,
    compute_flops: bool = True,
    method: Any = None,
    mutable: Any = None,
    **kwargs: Any,
) -> str:
    """The summary table of ``module`` called on ``args``: one row per method call.

    Columns: path, module (class and method), inputs, outputs, the variables each
    module holds per collection (count and bytes), and, with ``compute_flops``,
    the FLOPs of the call (XLA's cost of the compiled ``apply``, including
    submodules). Nothing is computed eagerly: ``init`` runs under
    ``jax.eval_shape``.

    Args:
      module: the Module to summarize.
      rngs: the rngs for ``module.init`` (a key or a dict of keys).
      *args: the arguments of the call.
      depth: show calls at most this many levels below the root (``None``: all).
      compute_flops: add the FLOPs column (compiles ``apply`` once).
      method: the method to call (as ``init``'s ``method=``).
      mutable: passed to ``init`` when given.
      **kwargs: keyword arguments of the call.

    Returns:
      The table as a string.
    """
    import jax

    from linen.core import plugin_bus
    from linen.profiling._costs import module_costs
    from linen.profiling._state import override_named_call

    init_kwargs = dict(kwargs)
    if method is not None:
        init_kwargs['method'] = method
    if mutable is not None:
        init_kwargs['mutable'] = mutable

    records: list[_Call] = []
    name = plugin_bus.register(_RecorderPlugin, name='linen-profiling-tabulate')
    token = _records.set(records)
    try:
        variables = jax.eval_shape(lambda r: module.init(r, *args, **init_kwargs), rngs)
    finally:
        _records.reset(token)
        plugin_bus.unregister(name)

    flops: dict[str, float] = {}
    if compute_flops:
        apply_kwargs = dict(kwargs)
        if method is not None:
            apply_kwargs['method'] = method

        def run(v, *a):
            # Every collection mutable, so modules that update state (counters,
            # batch statistics) run as they do in training.
            return module.apply(v, *a, mutable=True, **apply_kwargs)

        with override_named_call(True):
            costs = module_costs(run, variables, *args)
        flops = {row.path: row.inclusive_flops for row in costs.rows}

    header = ['path', 'module', 'inputs', 'outputs']
    collections = sorted(variables) if isinstance(variables, Mapping) else []
    header += collections
    if compute_flops:
        header.append('flops')
    rows = []
    totals = {collection: [0, 0] for collection in collections}
    seen_paths = set()
    for call in records:
        if depth is not None and len(call.path) > depth:
            continue
        own = _own_variables(variables, call.path) if call.path not in seen_paths else {}
        seen_paths.add(call.path)
        method_suffix = '' if call.method_name == '__call__' else f'.{call.method_name}'
        row = [
            '/'.join(call.path),
            call.module_type + method_suffix,
            _describe(call.inputs),
            _describe(call.outputs),
        ]
        for collection in collections:
            count, size = own.get(collection, (0, 0))
            totals[collection][0] += count
            totals[collection][1] += size
            row.append(f'{count:,} ({human(size, "B")})' if count else '')
        if compute_flops:
            row.append(f'{flops.get(call.label_path, 0.0):,.0f}')
        rows.append(row)
    total_row = ['', 'Total', '', '']
    for collection in collections:
        count, size = totals[collection]
        total_row.append(f'{count:,} ({human(size, "B")})')
    if compute_flops:
        total_row.append('')
    rows.append(total_row)
    title = f'{type(module).__name__} Summary'
    return format_table(title, header, rows)
