"""The output sharding of a contraction under ``Explicit`` mesh axes.

Under explicit axes a sharding is part of an array's type, and JAX refuses a
``dot_general`` whose contracting dimensions are sharded on both sides ("it is
ambiguous how the output should be sharded"). Flax's ``Dense`` fails there; linen
picks the answer a user would write by hand: the output keeps the input's batch
sharding and the kernel's output-feature sharding (when that mesh axis is not
already used by the batch), and XLA reduces over the contracted axis.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import PartitionSpec

# [(the abstract mesh last seen, whether it has explicit axes)]
_LAST_MESH: list[tuple[Any, bool]] = [(None, False)]


def _axes(entry: Any) -> tuple:
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def dense_out_sharding(inputs: Any, kernel: Any) -> PartitionSpec | None:
    """``out_sharding`` for ``inputs @ kernel`` (kernel 2-D), or ``None`` when not needed.

    ``None`` (let JAX decide) outside a mesh with explicit axes, and wherever JAX
    can infer the output on its own (contracting dimension unsharded on a side).
    """
    mesh = jax.sharding.get_abstract_mesh()
    last = _LAST_MESH[0]
    if mesh is last[0]:
        # Every Dense call asks; the mesh object rarely changes (outside any mesh
        # JAX hands back the same empty one), and `empty` is a computed property.
        explicit = last[1]
    else:
        explicit = not mesh.empty and bool(mesh.explicit_axes)
        _LAST_MESH[0] = (mesh, explicit)  # one tuple: threads see a consistent pair
    if not explicit:
        return None
    in_spec = tuple(jax.typeof(inputs).sharding.spec)
    k_spec = tuple(jax.typeof(kernel).sharding.spec)
    in_spec += (None,) * (jnp_ndim(inputs) - len(in_spec))
    k_spec += (None,) * (2 - len(k_spec))
    if not (_axes(in_spec[-1]) and _axes(k_spec[0])):
        return None
    batch = in_spec[:-1]
    used = {a for e in batch for a in _axes(e)}
    features = k_spec[1] if used.isdisjoint(_axes(k_spec[1])) else None
    return PartitionSpec(*batch, features)


def jnp_ndim(x: Any) -> int:
    return len(jax.typeof(x).shape)
