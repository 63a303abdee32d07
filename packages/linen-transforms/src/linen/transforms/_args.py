"""Modules and Variables passed as arguments into a lifted method (Flax's multi-scope lifting).

``nn.vmap(f)(self, other_module, x)`` lifts ``other_module``'s variables too: its
scope joins the transform next to ``self``'s, and inside ``f`` it is a clone bound
to the inner scope. A Variable argument likewise becomes a Variable of the inner
scope standing for its own. The objects leave the arguments as empty pytrees
(:class:`Slot`), so JAX never sees them; the transform lifts a tuple of scopes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax

from linen.core import Variable
from linen.module import Module
from linen.module.dispatch import field_names


class Slot:
    """Where a lifted Module or Variable argument sat: a pytree with no leaves.

    Its auxiliary data is its position among the lifted objects, so transforms that
    compare tree structures (``jit``'s cache) see equal slots as equal.
    """

    __slots__ = ('index',)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f'Slot({self.index})'

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Slot) and other.index == self.index

    def __hash__(self) -> int:
        return hash((Slot, self.index))


jax.tree_util.register_pytree_node(Slot, lambda s: ((), s.index), lambda i, _: Slot(i))


def _liftable(x: Any) -> bool:
    if isinstance(x, Module):
        return x.scope is not None
    return isinstance(x, Variable)


def _is_leaf(x: Any) -> bool:
    return isinstance(x, (Module, Variable))


def _slot_for(obj: Any, objects: list) -> Slot:
    """The slot of ``obj``, appended to ``objects`` unless already there.

    As in Flax, one object passed twice (or as an argument and in a field) is lifted
    once: both places get the same inner Module or Variable.
    """
    for i, seen in enumerate(objects):
        if seen is obj:
            return Slot(i)
    objects.append(obj)
    return Slot(len(objects) - 1)


def extract(args: tuple, kwargs: dict) -> tuple[tuple, dict, list]:
    """``(args, kwargs, objects)``: bound Modules and Variables replaced by :class:`Slot`.

    Unbound Modules stay where they are (they bind inside, as in Flax).
    """
    found: list = []
    if kwargs:
        # Flax's lifting maps over (args, kwargs) as a pytree: keyword arguments come
        # out in sorted order (what its warning about dropped kwargs lists).
        kwargs = dict(sorted(kwargs.items()))

    def take(x):
        if _is_leaf(x) and _liftable(x):
            return _slot_for(x, found)
        return x

    # Fast path: most calls pass arrays only.
    leaves = jax.tree_util.tree_leaves((args, kwargs), is_leaf=_is_leaf)
    if not any(_is_leaf(leaf) and _liftable(leaf) for leaf in leaves):
        return args, kwargs, []
    args, kwargs = jax.tree_util.tree_map(take, (args, kwargs), is_leaf=_is_leaf)
    return args, kwargs, found


def extract_fields(module: Any, objects: list) -> dict:
    """Bound Modules and Variables held in ``module``'s fields, replaced by slots.

    As in Flax, a module given to a transformed class as a field
    (``nn.vmap(Block, ...)(dense)``) has its variables lifted too, and so has a
    Variable field. Submodules the module adopted itself (its own children) are
    lifted with it already. The objects are appended to ``objects``.
    """
    updates = {}
    for name in field_names(type(module)):
        value = module.__dict__.get(name)
        if not isinstance(value, (Module, Variable, list, tuple, Mapping)):
            continue

        def take(x):
            if isinstance(x, Variable):
                return _slot_for(x, objects)
            if isinstance(x, Module) and x.scope is not None and x.parent is not module:
                # Its own fields first, as Flax does (``C(B(A()))``: A is lifted too);
                # `restore` rebinds them before it, and hands them to its clone.
                if not any(o is x for o in objects):
                    extract_fields(x, objects)
                return _slot_for(x, objects)
            return x

        new = jax.tree_util.tree_map(take, value, is_leaf=_is_leaf)
        if any(isinstance(leaf, Slot) for leaf in _slots(new)):
            updates[name] = new
    return updates


def _slots(tree: Any) -> list:
    return [
        x
        for x in jax.tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, Slot))
        if isinstance(x, Slot)
    ]


def restore_fields(updates: dict, objects: list, inner_scopes: tuple) -> dict:
    """The field values of :func:`extract_fields`, each module rebound inside."""
    if not updates:
        return {}
    return restore((), updates, objects, inner_scopes)[1]


def scopes_of(objects: list) -> tuple:
    """The scope each lifted object lifts."""
    return tuple(o.scope for o in objects)


def restore(args: tuple, kwargs: dict, objects: list, inner_scopes: tuple) -> tuple[tuple, dict]:
    """Put back each object, rebound to its inner scope."""
    rebound: list = []
    for o, s in zip(objects, inner_scopes):
        rebound.append(_rebind(o, s, objects, rebound))

    def put(x):
        return rebound[x.index] if isinstance(x, Slot) else x

    is_slot = lambda x: isinstance(x, Slot)
    return jax.tree_util.tree_map(put, (args, kwargs), is_leaf=is_slot)


def _rebind(obj: Any, inner_scope: Any, objects: list, rebound: list) -> Any:
    """``obj`` bound to its inner scope; a Module's fields holding lifted objects (rebound
    already: :func:`extract_fields` puts them first) get their inner counterparts."""
    if isinstance(obj, Variable):
        return Variable(inner_scope, obj.collection, obj.name, obj.unbox)
    updates = {}
    if rebound:
        inner_of = {id(o): r for o, r in zip(objects, rebound)}

        def swap(x):
            return inner_of.get(id(x), x) if isinstance(x, (Module, Variable)) else x

        for name in field_names(type(obj)):
            value = obj.__dict__.get(name)
            if isinstance(value, (Module, Variable, list, tuple, dict)):
                new = jax.tree_util.tree_map(swap, value, is_leaf=_is_leaf)
                if any(a is not b for a, b in zip(_leaves(value), _leaves(new))):
                    updates[name] = new
    return obj.clone(parent=inner_scope, **updates)


def _leaves(tree: Any) -> list:
    return jax.tree_util.tree_leaves(tree, is_leaf=_is_leaf)


def cache_key(objects: list) -> tuple:
    """What of the lifted objects decides a trace: Module class and fields, Variable names."""
    from linen.transforms._jit import _hashable

    out = []
    for o in objects:
        if isinstance(o, Module):
            fields = tuple(o.__dict__[f] for f in field_names(type(o)))
            out.append((type(o), _hashable(fields)))
        else:
            out.append(('Variable', o.collection, o.name, o.unbox))
    return tuple(out)
