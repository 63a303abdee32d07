"""Output shardings of the layers' contractions under ``Explicit`` mesh axes.

Under explicit axes a sharding is part of an array's type and every operation must
be able to say how its output is sharded. JAX refuses a contraction (``dot_general``,
``einsum``, ``matmul``) whose contracted dimension is sharded on both sides, or
sharded differently on the two sides, or whose output would use one mesh axis twice
("it is ambiguous how the output should be sharded"), and a convolution whose kernel
or input features are sharded at all. Flax's layers fail there; linen's pass the
``out_sharding`` a user would write by hand: every output dimension keeps the
sharding of the operand it comes from (the input first, then the kernel), a mesh
axis is used once, and XLA reduces over the contracted axes.

The helpers read the mesh from the operands' types (``jax.typeof(x).sharding``), so
they work under ``jax.set_mesh``, under the legacy ``with mesh:`` and with no
context at all. They return ``None`` (let JAX decide, exactly as before) wherever no
operand is typed with explicit axes (``Auto`` meshes and no mesh: the traced program
is unchanged) and wherever JAX can infer the output sharding on its own.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

# Public since JAX added explicit sharding; a JAX without it has no explicit axes.
_EXPLICIT = getattr(getattr(jax.sharding, 'AxisType', None), 'Explicit', None)
# (bound once: the layers test for tracers on every call)
_Tracer = jax.core.Tracer


def _axes(entry: Any) -> tuple:
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def _sharding(x: Any) -> Any:
    return getattr(jax.typeof(x), 'sharding', None)


def explicit_mesh(*operands: Any) -> Any:
    """The (abstract) mesh of the first operand typed with ``Explicit`` axes, or ``None``."""
    if _EXPLICIT is None:
        return None
    # Every layer call asks this of its operands: attribute reads and one dict
    # lookup per operand, no calls. A JAX value's type is its ``aval`` (a slot on
    # tracers, cached on arrays: what ``jax.typeof`` returns, without its handler
    # dispatch); a mesh's answer is cached (meshes are few and immutable).
    for x in operands:
        try:
            mesh = x.aval.sharding.mesh
        except AttributeError:  # None, NumPy values, Python scalars: no mesh
            continue
        try:
            explicit = _MESH_IS_EXPLICIT[mesh]
        except KeyError:
            if len(_MESH_IS_EXPLICIT) >= 256:
                _MESH_IS_EXPLICIT.clear()
            explicit = _MESH_IS_EXPLICIT[mesh] = _has_explicit_axes(mesh)
        except TypeError:  # an unhashable mesh-like object
            explicit = _has_explicit_axes(mesh)
        if explicit:
            return mesh
    return None


# mesh -> whether it has an Explicit axis (bounded: a program uses a handful of meshes)
_MESH_IS_EXPLICIT: dict[Any, bool] = {}


def _has_explicit_axes(mesh: Any) -> bool:
    if mesh.empty:
        return False
    return any(t == _EXPLICIT for t in (getattr(mesh, 'axis_types', None) or ()))


def spec_of(x: Any) -> tuple:
    """``x``'s sharding spec from its type, one entry per dimension."""
    ndim = len(jax.typeof(x).shape)
    spec = tuple(getattr(_sharding(x), 'spec', None) or ())
    return spec[:ndim] + (None,) * (ndim - len(spec))


def _fits(entries: Sequence[Any]) -> bool:
    """No mesh axis used by two entries."""
    used = [a for e in entries for a in _axes(e)]
    return len(used) == len(set(used))


def _first_come(entries: Sequence[Any], order: Sequence[int]) -> list:
    """``entries`` with each mesh axis kept by the first entry (in ``order``) that uses it."""
    kept: list[Any] = [None] * len(entries)
    taken: set = set()
    for i in order:
        axes = _axes(entries[i])
        if axes and taken.isdisjoint(axes):
            kept[i] = entries[i]
            taken.update(axes)
    return kept


def contraction_out_sharding(
    lhs: Any, rhs: Any, lhs_labels: str, rhs_labels: str, out_labels: str
) -> NamedSharding | None:
    """``out_sharding`` for the einsum ``'<lhs>,<rhs>-><out>'`` (labels spelled out, no ``...``).

    ``None`` outside explicit axes and wherever JAX infers the output by itself.
    """
    mesh = explicit_mesh(lhs, rhs)
    if mesh is None:
        return None
    if len(lhs_labels) != len(jax.typeof(lhs).shape) or len(rhs_labels) != len(
        jax.typeof(rhs).shape
    ):
        return None  # labels that do not fit the operands: let JAX say so
    if len(set(lhs_labels)) != len(lhs_labels) or len(set(rhs_labels)) != len(rhs_labels):
        return None  # a trace or diagonal: JAX's own rules apply
    if not set(out_labels) <= {*lhs_labels, *rhs_labels}:
        return None  # not a valid contraction: let JAX say so
    left = dict(zip(lhs_labels, spec_of(lhs), strict=True))
    right = dict(zip(rhs_labels, spec_of(rhs), strict=True))
    # JAX's rule: a dimension of both operands is sharded alike on both sides (newer
    # JAX also refuses sharded vs. unsharded), and a contracted one not on both
    # sides; batch dimensions take the input's sharding.
    clash = any(
        left[c] != right[c] or (_axes(left[c]) and c not in out_labels)
        for c in left.keys() & right.keys()
    )
    inferred = [left[c] if c in left else right[c] for c in out_labels]
    if not clash and _fits(inferred):
        return None
    wanted = [left[c] if _axes(left.get(c)) else right.get(c) for c in out_labels]
    # The input's dimensions (batch, sequence) keep their axes before the kernel's.
    order = [i for i, c in enumerate(out_labels) if c in left]
    order += [i for i, c in enumerate(out_labels) if c not in left]
    return NamedSharding(mesh, PartitionSpec(*_first_come(wanted, order)))


def _dot_general_labels(lhs_ndim: int, rhs_ndim: int, dimension_numbers: Any) -> tuple:
    """``dot_general``'s dimension numbers as einsum labels ``(lhs, rhs, out)``."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    letters = iter(string.ascii_letters)
    lhs_labels = [next(letters) for _ in range(lhs_ndim)]
    rhs_labels: list[str | None] = [None] * rhs_ndim
    for i, j in (*zip(lhs_contract, rhs_contract), *zip(lhs_batch, rhs_batch)):
        rhs_labels[j] = lhs_labels[i]
    rhs_labels = [label or next(letters) for label in rhs_labels]
    shared = {*lhs_contract, *lhs_batch}
    rhs_shared = {*rhs_contract, *rhs_batch}
    out = [lhs_labels[i] for i in lhs_batch]
    out += [lhs_labels[i] for i in range(lhs_ndim) if i not in shared]
    out += [rhs_labels[j] for j in range(rhs_ndim) if j not in rhs_shared]
    return ''.join(lhs_labels), ''.join(rhs_labels), ''.join(out)


def dot_general_out_sharding(lhs: Any, rhs: Any, dimension_numbers: Any) -> NamedSharding | None:
    """:func:`contraction_out_sharding` for ``lax.dot_general``'s dimension numbers."""
    if explicit_mesh(lhs, rhs) is None:
        return None
    labels = _dot_general_labels(
        len(jax.typeof(lhs).shape), len(jax.typeof(rhs).shape), dimension_numbers
    )
    return contraction_out_sharding(lhs, rhs, *labels)


def _reshard(x: Any, entries: Sequence[Any], mesh: Any) -> Any:
    """``x`` moved to ``P(*entries)`` on ``mesh``; unchanged when it is already there."""
    if tuple(entries) == spec_of(x):
        return x
    return jax.sharding.reshard(x, NamedSharding(mesh, PartitionSpec(*entries)))


def inferable_operands(
    lhs: Any, rhs: Any, lhs_labels: str, rhs_labels: str, out_labels: str
) -> tuple[Any, Any]:
    """The operands of ``'<lhs>,<rhs>-><out>'`` resharded so JAX infers its output.

    For a contraction linen cannot pass ``out_sharding`` to (a user's ``dot_general``
    or ``einsum``, which need not take one): each operand dimension takes the
    sharding :func:`contraction_out_sharding` gives its output dimension, and a
    contracted dimension is gathered (unsharded) on both sides. The output is then
    sharded as with linen's own contraction; the price is the gather of the
    contracted dimensions instead of a reduction over them. Unchanged wherever JAX
    infers the output by itself (and outside explicit axes).
    """
    out = contraction_out_sharding(lhs, rhs, lhs_labels, rhs_labels, out_labels)
    if out is None:
        return lhs, rhs
    spec = tuple(out.spec) + (None,) * (len(out_labels) - len(out.spec))
    entry = dict(zip(out_labels, spec, strict=True))
    lhs = _reshard(lhs, [entry.get(c) for c in lhs_labels], out.mesh)
    rhs = _reshard(rhs, [entry.get(c) for c in rhs_labels], out.mesh)
    return lhs, rhs


def inferable_dot_general_operands(lhs: Any, rhs: Any, dimension_numbers: Any) -> tuple[Any, Any]:
    """:func:`inferable_operands` for ``lax.dot_general``'s dimension numbers."""
    if explicit_mesh(lhs, rhs) is None:
        return lhs, rhs
    labels = _dot_general_labels(
        len(jax.typeof(lhs).shape), len(jax.typeof(rhs).shape), dimension_numbers
    )
    return inferable_operands(lhs, rhs, *labels)


def dense_out_sharding(inputs: Any, kernel: Any) -> NamedSharding | None:
    """``out_sharding`` for ``inputs @ kernel`` with a 2-D kernel."""
    ndim = jnp.ndim(inputs)
    return dot_general_out_sharding(inputs, kernel, (((ndim - 1,), (0,)), ((), ())))


def conv_out_sharding(lhs: Any, rhs: Any, out_shape: Sequence[int]) -> NamedSharding | None:
    """``out_sharding`` for a channels-last convolution (``lhs`` N..C, ``rhs`` ..IO).

    JAX infers the output only when the kernel is replicated and the input features
    are not sharded. Otherwise the output keeps the input's batch sharding, its
    spatial sharding where the output size still divides, and the kernel's
    output-feature sharding.
    """
    mesh = explicit_mesh(lhs, rhs)
    if mesh is None:
        return None
    lhs_spec, rhs_spec = spec_of(lhs), spec_of(rhs)
    if not any(_axes(e) for e in rhs_spec) and not _axes(lhs_spec[-1]):
        return None
    sizes = dict(mesh.shape)
    wanted = [lhs_spec[0]]
    for entry, size in zip(lhs_spec[1:-1], out_shape[1:-1], strict=True):
        parts = 1
        for axis in _axes(entry):
            parts *= sizes[axis]
        wanted.append(entry if size % parts == 0 else None)
    wanted.append(rhs_spec[-1])
    return NamedSharding(mesh, PartitionSpec(*_first_come(wanted, range(len(wanted)))))


def replicate_for_conv(inputs: Any, kernel: Any) -> tuple[Any, Any]:
    """The operands resharded so JAX infers a convolution's output (for ``conv_transpose``).

    ``lax.conv_transpose`` takes no ``out_sharding``; under explicit axes the kernel
    is gathered (replicated) and the input features unsharded, so the output keeps
    the input's batch and spatial sharding. Outside explicit axes nothing moves.
    """
    mesh = explicit_mesh(inputs, kernel)
    if mesh is None:
        return inputs, kernel
    in_spec, k_spec = spec_of(inputs), spec_of(kernel)
    if any(_axes(e) for e in k_spec):
        kernel = jax.sharding.reshard(kernel, NamedSharding(mesh, PartitionSpec()))
    if _axes(in_spec[-1]):
        inputs = jax.sharding.reshard(
            inputs, NamedSharding(mesh, PartitionSpec(*in_spec[:-1], None))
        )
    return inputs, kernel


def match_trailing(value: Any, y: Any) -> Any:
    """``value`` (a bias broadcast onto ``y``'s trailing axes) resharded like ``y``.

    Under explicit axes a sharded bias whose sharding differs from the output's
    would either clash with it or reshard the output; the bias follows the output
    instead. Outside explicit axes, or when they agree, ``value`` is returned as is.
    """
    mesh = explicit_mesh(value, y)
    if mesh is None:
        return value
    v_spec, y_spec = spec_of(value), spec_of(y)
    y_spec = y_spec[len(y_spec) - len(v_spec) :]
    if all(not _axes(v) or v == t for v, t in zip(v_spec, y_spec, strict=True)):
        return value
    shape = jax.typeof(value).shape
    target = tuple(None if d == 1 else t for t, d in zip(y_spec, shape, strict=True))
    return jax.sharding.reshard(value, NamedSharding(mesh, PartitionSpec(*target)))


def reshard_spec(x: Any, entries: Sequence[Any]) -> Any:
    """``x`` moved to ``P(*entries)`` on its own explicit mesh (unchanged outside one)."""
    mesh = explicit_mesh(x)
    return x if mesh is None else _reshard(x, entries, mesh)


def match_sharding(value: Any, like: Any) -> Any:
    """``value`` resharded to ``like``'s sharding under explicit axes (same shape)."""
    mesh = explicit_mesh(like, value)
    if mesh is None:
        return value
    return _reshard(value, spec_of(like), mesh)


def local_conv(
    inputs: Any,
    kernel: Any,
    *,
    filter_shape: Sequence[int],
    window_strides: Sequence[int],
    padding: Any,
    lhs_dilation: Sequence[int],
    rhs_dilation: Sequence[int],
    dimension_numbers: Any,
    precision: Any,
) -> Any:
    """``lax.conv_general_dilated_local`` (channels last) for operands on explicit axes.

    JAX's local convolution extracts patches with a convolution (which refuses
    sharded input features) and contracts them with the kernel, whose output
    positions are a batch dimension of that contraction (which must be sharded alike
    on both sides). Here the same two steps run with shardings JAX accepts: the
    patches are taken from the input sharded over its batch only, they take the
    kernel's position sharding (a mesh axis the batch uses is gathered on the
    kernel), and the contraction gets its ``out_sharding``. The kernel's feature
    sharding is kept.
    """
    mesh = explicit_mesh(inputs, kernel)
    n = len(filter_shape)
    batch = spec_of(inputs)[0]
    inputs = _reshard(inputs, (batch,) + (None,) * (n + 1), mesh)
    patches = jax.lax.conv_general_dilated_patches(
        inputs,
        filter_shape=filter_shape,
        window_strides=window_strides,
        padding=padding,
        lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation,
        dimension_numbers=dimension_numbers,
        precision=precision,
    )
    k_spec = spec_of(kernel)
    taken = set(_axes(batch))
    where = tuple(e if taken.isdisjoint(_axes(e)) else None for e in k_spec[:n])
    kernel = _reshard(kernel, where + k_spec[n:], mesh)
    patches = _reshard(patches, (batch, *where, None), mesh)
    spatial = string.ascii_lowercase[:n]
    lhs, rhs, out = f'N{spatial}C', f'{spatial}CF', f'N{spatial}F'
    out_sharding = contraction_out_sharding(patches, kernel, lhs, rhs, out)
    extra = {} if out_sharding is None else {'out_sharding': out_sharding}
    return jnp.einsum(f'{lhs},{rhs}->{out}', patches, kernel, precision=precision, **extra)
