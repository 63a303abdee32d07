"""``tabulate``: Flax's per-call summary table, from a method wrapper that records calls.

While the table is built, recording is switched on in the current context
(``_recording.py``, a ContextVar: no process-wide state, so concurrent calls do
not mix) and the profiling plugin's method wrapper records every wrapped call with its module path, class, method, input and
output shapes, and the label path it runs under. Parameters are counted from the
variables ``init`` returns (abstractly, with ``jax.eval_shape``: nothing is
computed), and FLOPs come from :func:`module_costs` of ``apply``, joined on the
label path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from linen.profiling._recording import recording
from linen.profiling._report import format_table, human

__all__ = ['tabulate']


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

    from linen.profiling._costs import module_costs
    from linen.profiling._state import override_named_call

    init_kwargs = dict(kwargs)
    if method is not None:
        init_kwargs['method'] = method
    if mutable is not None:
        init_kwargs['mutable'] = mutable

    with recording() as records:
        variables = jax.eval_shape(lambda r: module.init(r, *args, **init_kwargs), rngs)

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
