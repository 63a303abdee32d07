"""``saved_activations``: bytes the forward pass keeps for the backward pass, per module.

Read from the optimized HLO of a compiled gradient computation or train step
(``jax.jit(fn).lower(*args).compile().as_text()``): a value is *saved* when an
instruction of the forward pass produces it and an instruction of the backward
pass (or of ``remat``'s recomputation) reads it. That is what XLA really keeps
between the passes, after its own choices (it may keep a matmul's output
instead of the ``relu`` mask JAX's ``vjp`` names, and recompute cheap
elementwise values instead of keeping them). Each saved value belongs to the
module path in its producer's ``op_name`` label (linen's labels, matched as in
:func:`~linen.profiling.module_path_from_op_name`); the pass comes from
:func:`~linen.profiling.phase_of_op_name`. Parameters and inputs the backward
pass reads are not counted: they are the arguments, held anyway.

The same compilation's ``memory_analysis()`` is kept beside the result, for
comparison (see :class:`SavedActivations`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from linen.profiling._compile import compile_for_report
from linen.profiling._cost_model import shape_bytes
from linen.profiling._hlo import (
    HloComputation,
    HloInstruction,
    HloModuleText,
    module_path_from_op_name,
    parse_hlo_module,
    phase_of_op_name,
)
from linen.profiling._report import display_path, format_table, human
from linen.profiling._tree import tree_order, tree_rows
from linen.profiling.errors import MemoryAnalysisUnavailableWarning

__all__ = ['SavedActivations', 'SavedValue', 'saved_activations']

# Instructions that make no new buffer of their own: a user of this kind is
# looked through to its own users.
_VIEWS = frozenset({'bitcast', 'get-tuple-element', 'tuple', 'copy', 'opt-barrier'})
_NOT_PRODUCERS = frozenset({'parameter', 'constant', 'tuple', 'after-all', 'partition-id'})
_MEMORY_FIELDS = (
    'argument_size_in_bytes',
    'output_size_in_bytes',
    'alias_size_in_bytes',
    'temp_size_in_bytes',
)


@dataclass(frozen=True)
class SavedValue:
    """One value kept from the forward pass for the backward pass."""

    path: str
    instruction: str
    shape: str
    nbytes: int
    op_name: str


@dataclass(frozen=True)
class SavedActivations:
    """What :func:`saved_activations` returns.

    ``own[path]`` is the bytes saved by ops labelled exactly with ``path``,
    ``inclusive[path]`` adds its submodules; ``total_bytes`` sums ``values``.

    ``memory_analysis`` is the compiled program's ``memory_analysis()`` as a
    dict with ``argument_size_in_bytes`` (inputs: parameters, optimizer
    state, batch), ``output_size_in_bytes``, ``alias_size_in_bytes`` (outputs
    written into donated inputs) and ``temp_size_in_bytes`` (everything else
    the program allocates: saved activations, gradients and scratch, after
    XLA's buffer reuse); ``None`` when the backend gives none (a
    :class:`~linen.profiling.errors.MemoryAnalysisUnavailableWarning` said so).
    For a gradient computation whose gradients are its outputs, the saved
    activations are what ``temp_size_in_bytes`` holds; in a train step XLA may
    reuse an activation's buffer for a gradient once the activation is read, so
    ``temp`` is at most gradients plus activations.
    """

    values: tuple[SavedValue, ...]
    own: dict[str, int]
    inclusive: dict[str, int]
    total_bytes: int
    memory_analysis: dict[str, int] | None
    hlo_text: str = ''

    def __getitem__(self, path: str) -> int:
        """Inclusive saved bytes of ``path`` (0 for a path of the program that saved none)."""
        return self.inclusive.get(path, 0)

    def __str__(self) -> str:
        body = [
            [
                display_path(path),
                human(self.inclusive[path], 'B'),
                human(self.own.get(path, 0), 'B'),
            ]
            for path in tree_order(self.inclusive)
        ]
        body.append(['total', human(self.total_bytes, 'B'), ''])
        return format_table(
            'Activations saved for the backward pass (compiled program)',
            ['module', 'saved', 'own saved'],
            body,
        )


def _first_op_name(op_name: str) -> str:
    # XLA joins the op_names of merged instructions with ';'; the first is the
    # one the instruction was made from.
    return op_name.split(';', 1)[0]


def _phase(instruction: HloInstruction) -> str | None:
    if not instruction.op_name:
        return None
    return phase_of_op_name(_first_op_name(instruction.op_name))


def _control_flow_computations(module: HloModuleText) -> list[HloComputation]:
    """The entry computation and those it runs as control flow (not fused bodies)."""
    found: dict[str, HloComputation] = {}
    pending = [module.entry]
    while pending:
        name = pending.pop()
        computation = module.computations.get(name)
        if computation is None or name in found:
            continue
        found[name] = computation
        for instruction in computation.instructions.values():
            if instruction.opcode in ('while', 'conditional', 'call'):
                pending.extend(instruction.called)
    return list(found.values())


def _while_element_op_name(module: HloModuleText, producer: HloInstruction, index: int) -> str:
    """The label of element ``index`` of a ``while``'s result: its body's root operand."""
    body_names = [n for n in producer.called if n in module.computations]
    for name in body_names:
        body = module.computations[name]
        root = body.root
        if root is None or root.opcode != 'tuple' or index >= len(root.operands):
            continue
        element = body.instructions.get(root.operands[index])
        if element is not None and element.op_name:
            return _stacked_source(body, element)
    return producer.op_name


def _stacked_source(body: HloComputation, element: HloInstruction) -> str:
    """The label of what a loop stacks into a buffer, else the element's own label.

    A scan keeps each iteration's residual by a ``dynamic_update_slice`` into a
    stacked buffer; that op carries the scan's label, the value written carries
    the label of the module that computed it.
    """
    own = _first_op_name(element.op_name)
    if 'dynamic_update_slice' not in own.rsplit('/', 1)[-1]:
        return element.op_name
    base = module_path_from_op_name(own)
    for operand in element.operands[1:]:
        source = body.instructions.get(operand)
        for _ in range(4):  # through copies and bitcasts
            if source is None or source.op_name or source.opcode not in _VIEWS:
                break
            source = body.instructions.get(source.operands[0]) if source.operands else None
        if source is not None and source.op_name:
            path = module_path_from_op_name(_first_op_name(source.op_name))
            if path and path != base and (not base or path.startswith(base + '/')):
                return source.op_name
    return element.op_name


def _gte_index(instruction: HloInstruction) -> int | None:
    marker = 'index='
    at = instruction.attributes.find(marker)
    if at < 0:
        return None
    digits = ''
    for char in instruction.attributes[at + len(marker) :]:
        if not char.isdigit():
            break
        digits += char
    return int(digits) if digits else None


def saved_values(module: HloModuleText) -> list[SavedValue]:
    """Every value a forward instruction produces and a backward instruction reads."""
    result: list[SavedValue] = []
    for computation in _control_flow_computations(module):
        instructions = computation.instructions
        users: dict[str, list[HloInstruction]] = {}
        for instruction in instructions.values():
            for operand in instruction.operands:
                users.setdefault(operand, []).append(instruction)

        def read_backward(name: str, seen: set[str], users=users) -> bool:
            # Unlabelled instructions and views pass the value on: look at their
            # users too (iteratively: chains can be long).
            pending = [name]
            while pending:
                for user in users.get(pending.pop(), ()):
                    if user.name in seen:
                        continue
                    seen.add(user.name)
                    phase = _phase(user)
                    if phase in ('backward', 'recompute'):
                        return True
                    if phase is None or user.opcode in _VIEWS:
                        pending.append(user.name)
            return False

        for instruction in instructions.values():
            op_name = instruction.op_name
            if instruction.opcode == 'get-tuple-element' and instruction.operands:
                # An element of a forward loop's result (scan's stacked residuals).
                source = instructions.get(instruction.operands[0])
                if source is None or source.opcode == 'parameter':
                    continue
                index = _gte_index(instruction)
                if source.opcode == 'while' and index is not None:
                    op_name = _while_element_op_name(module, source, index)
                else:
                    op_name = op_name or source.op_name
            elif instruction.opcode in _NOT_PRODUCERS or instruction.shape.startswith('('):
                continue
            if not op_name or phase_of_op_name(_first_op_name(op_name)) != 'forward':
                continue
            if not read_backward(instruction.name, set()):
                continue
            result.append(
                SavedValue(
                    path=module_path_from_op_name(_first_op_name(op_name)),
                    instruction=instruction.name,
                    shape=instruction.shape,
                    nbytes=int(shape_bytes(instruction.shape)),
                    op_name=_first_op_name(op_name),
                )
            )
    return result


def memory_analysis_dict(compiled: Any) -> dict[str, int] | None:
    """``compiled.memory_analysis()`` as a dict; ``None``, with a warning, when unavailable."""
    try:
        stats = compiled.memory_analysis()
    except Exception as error:  # backends without it raise various errors
        warnings.warn(
            MemoryAnalysisUnavailableWarning(f'{type(error).__name__}: {error}'), stacklevel=3
        )
        return None
    if isinstance(stats, (list, tuple)):  # one entry per device program in some versions
        stats = stats[0] if stats else None
    if stats is None or not all(hasattr(stats, field) for field in _MEMORY_FIELDS):
        warnings.warn(
            MemoryAnalysisUnavailableWarning(f'memory_analysis() returned {stats!r}'),
            stacklevel=3,
        )
        return None
    return {field: int(getattr(stats, field)) for field in _MEMORY_FIELDS}


def activations_from_hlo_text(
    hlo_text: str, memory_analysis: dict[str, int] | None = None
) -> SavedActivations:
    """:class:`SavedActivations` of an optimized HLO module given as text."""
    values = tuple(saved_values(parse_hlo_module(hlo_text)))
    own: dict[str, list[float]] = {}
    for value in values:
        own.setdefault(value.path, [0.0])[0] += value.nbytes
    return SavedActivations(
        values=values,
        own={path: int(v[0]) for path, v in own.items()},
        inclusive={path: int(total[0]) for path, _, total in tree_rows(own, 1)},
        total_bytes=sum(value.nbytes for value in values),
        memory_analysis=memory_analysis,
        hlo_text=hlo_text,
    )


def saved_activations(fn: Callable, *args: Any, **kwargs: Any) -> SavedActivations:
    """Bytes the forward pass of ``fn`` keeps for its backward pass, per module path.

    ``fn`` is a gradient computation or a whole train step (``jax.grad`` or
    ``jax.value_and_grad`` of a loss over ``model.apply``, then an optimizer
    update); it is jitted unless it already is, lowered and compiled once for
    ``args`` (nothing runs). Labels must be on (the default) when it is traced.

    Args:
      fn: the function to analyse.
      *args: its arguments (arrays or ``jax.ShapeDtypeStruct``).
      **kwargs: its keyword arguments.

    Returns:
      A :class:`SavedActivations`; pass it to :func:`module_memory` as
      ``activations=`` for the per-module memory table.

    >>> import jax, jax.numpy as jnp
    >>> from linen.profiling import label_scope
    >>> def loss(w, x):
    ...     with label_scope('Layer'):
    ...         y = jnp.tanh(x @ w)  # tanh's derivative reads its output
    ...     return y.sum()
    >>> saved = saved_activations(jax.grad(loss), jnp.ones((4, 4)), jnp.ones((2, 4)))
    >>> saved['Layer']  # one float32[2,4]
    32
    """

    compiled = compile_for_report(fn, args, kwargs)
    return activations_from_hlo_text(compiled.as_text(), memory_analysis_dict(compiled))
