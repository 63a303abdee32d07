"""The FLOPs columns of ``tabulate``: each call's FLOPs from one compiled program.

``module_costs`` of one compiled ``apply`` (and, for ``vjp_flops``, of its
``jax.vjp``) gives every instruction's FLOPs and the name stack it ran under. The
program is traced with an occurrence scope (``#k``) around each call, so the k-th
call of a label path is told apart from the others; each instruction's FLOPs go to
every call on its name stack (inclusive counts). A call whose label bound no
operation when traced did no work (Flax's 0); one that bound some but has no
instruction left in the compiled program was removed or merged by XLA (``n/a``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from linen.profiling._recording import recording

__all__ = ['Flops', 'count_flops']

_PARTITIONS = re.compile(r'\bnum_partitions=(\d+)')


def _call_chain(stack: str, labels: Any) -> list[tuple[str, int]]:
    """The ``(label path, occurrence)`` of each call a name stack runs under, outermost
    first: a label's occurrence is the ``#k`` scope just before it (1 without one)."""
    from linen.profiling._hlo import _unwrap
    from linen.profiling._recording import OCCURRENCE_PREFIX

    chain = []
    path: tuple[str, ...] = ()
    occurrence = 1
    for component in stack.split('/'):
        name = _unwrap(component)
        if name.startswith(OCCURRENCE_PREFIX) and name[1:].isdigit():
            occurrence = int(name[1:])
            continue
        if (*path, name) in labels:
            path = (*path, name)
            chain.append(('/'.join(path), occurrence))
            occurrence = 1
    return chain


def _traced_paths(fn: Callable, *args: Any) -> set[str]:
    """The label paths (and their parents) under which tracing ``fn`` binds any operation."""
    import jax

    from linen.profiling._labels import emitted_label_paths

    stacks: list[str] = []

    def walk(jaxpr: Any, prefix: str) -> None:
        for eqn in jaxpr.eqns:
            stack = '/'.join(p for p in (prefix, str(eqn.source_info.name_stack)) if p)
            stacks.append(stack)
            for param in eqn.params.values():
                for inner in param if isinstance(param, (tuple, list)) else (param,):
                    inner = getattr(inner, 'jaxpr', inner)  # a ClosedJaxpr's Jaxpr
                    if hasattr(inner, 'eqns'):
                        walk(inner, stack)

    # A fresh callable: jit's trace cache may hold ``fn`` traced before.
    walk(jax.make_jaxpr(lambda *a: fn(*a))(*args).jaxpr, '')
    labels = emitted_label_paths()
    return {path for stack in stacks for path, _ in _call_chain(stack, labels)}


def _flops_by_label(
    fn: Callable, *args: Any
) -> tuple[dict[str, float], dict[str, dict[int, float]], list[str]]:
    """Inclusive FLOPs per label path of ``fn``; for each label path under which tracing
    binds any operation, the inclusive FLOPs of each of its calls that has instructions
    in the compiled program; and what the reader must know about the FLOPs.

    A call absent from the compiled program did no work when tracing bound no
    operation under its label (Flax's 0); otherwise its work was removed or merged (n/a).
    """
    from linen.profiling._costs import module_costs
    from linen.profiling._labels import emitted_label_paths
    from linen.profiling._state import override_named_call

    with override_named_call(True):
        # Each call under an occurrence scope (``#k``: the k-th call of its label path),
        # so the compiled program tells the calls of one instance apart; a fresh
        # callable, so that nothing traced without the scopes is reused.
        with recording(capture_shapes=False, occurrences=True):
            costs = module_costs(lambda *a: fn(*a), *args)
        traced = _traced_paths(fn, *args)
    # Inclusive FLOPs of each call (occurrence) of each label path in the compiled program.
    labels = emitted_label_paths()
    per_call: dict[str, dict[int, float]] = {}
    for cost in costs.instructions:
        for path, occurrence in _call_chain(cost.op_name, labels):
            calls = per_call.setdefault(path, {})
            calls[occurrence] = calls.get(occurrence, 0.0) + cost.flops
    notes = []
    if costs.uncosted:
        notes.append(
            f'{len(costs.uncosted)} instruction(s) without a known cost '
            f'({", ".join(costs.uncosted[:3])}): FLOPs are lower bounds'
        )
    header = costs.hlo_text.split('\n', 1)[0]
    partitions = _PARTITIONS.search(header)
    if partitions and int(partitions.group(1)) > 1:
        notes.append(
            f'per device: the program is partitioned over {partitions.group(1)} devices '
            f'(shard_map or sharded arrays); work done on every device counts once'
        )
    return (
        {row.path: row.inclusive_flops for row in costs.rows},
        {path: per_call.get(path, {}) for path in traced},
        notes,
    )


@dataclass
class Flops:
    """The FLOPs columns: inclusive FLOPs per label path, and the columns that failed."""

    flops: dict[str, float] = field(default_factory=dict)
    vjp_flops: dict[str, float] = field(default_factory=dict)
    # label path -> {call: its inclusive FLOPs} for the calls with compiled instructions,
    # for the paths that bound any operation when traced (the others did no work: 0)
    flops_traced: dict[str, dict[int, float]] = field(default_factory=dict)
    vjp_flops_traced: dict[str, dict[int, float]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # column -> the error


def count_flops(
    apply: Callable, variables: Mapping, args: tuple, *, forward: bool, vjp: bool
) -> tuple[Flops, list[str]]:
    """FLOPs of ``apply(variables, *args)`` (``forward``) and of its ``jax.vjp`` (``vjp``)."""
    import jax

    result, notes = Flops(), []
    if forward:
        try:
            result.flops, result.flops_traced, flops_notes = _flops_by_label(
                apply, variables, *args
            )
            notes.extend(f'flops: {note}' for note in flops_notes)
        except Exception as error:  # reported in the table, not swallowed
            result.failed['flops'] = f'{type(error).__name__}: {error}'
    if vjp:

        def float_outputs(v, *a):
            out, _ = apply(v, *a)
            leaves = jax.tree_util.tree_leaves(out)
            # Python and NumPy scalars are constants of the program: nothing to differentiate.
            return [
                x
                for x in leaves
                if isinstance(x, jax.Array) and jax.numpy.issubdtype(x.dtype, jax.numpy.inexact)
            ]

        def forward_and_backward(v, cotangents, *a):
            # The primal outputs are returned and the cotangents are inputs, so
            # XLA can neither drop the forward pass nor fold a constant seed.
            out, pullback = jax.vjp(float_outputs, v, *a)
            return out, pullback(cotangents)

        cotangents = [
            jax.ShapeDtypeStruct(x.shape, x.dtype)
            for x in jax.eval_shape(float_outputs, variables, *args)
        ]
        try:
            result.vjp_flops, result.vjp_flops_traced, vjp_notes = _flops_by_label(
                forward_and_backward, variables, cotangents, *args
            )
            notes.extend(f'vjp_flops: {note}' for note in vjp_notes)
        except Exception as error:  # reported in the table, not swallowed
            result.failed['vjp_flops'] = f'{type(error).__name__}: {error}'
    for column, reason in result.failed.items():
        notes.append(f'{column}: n/a, compiling failed ({reason.splitlines()[0]})')
    return result, notes
