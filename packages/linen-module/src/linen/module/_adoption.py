"""Adoption: the Modules a Module holds in its fields and attributes become its submodules.

A Module made outside any module (``parent=None``) and handed to a parent is
cloned once per binding and named after the field or attribute that holds it; the
same object handed to two parents is one submodule, owned by the first parent that
adopts it and shared by the other, as in Flax. Fields are adopted when their module
is bound (``__post_init__``), attributes when ``setup`` assigns them.

``Module`` is set by :mod:`linen.module._module` once the class exists (the two
modules need each other; these functions only run after both are loaded).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

from linen.core import FrozenDict, Scope
from linen.core.config import config


class _NotLoaded:
    """Stands for ``Module`` until ``linen.module._module`` defines it."""


# linen.module._module.Module, set there once the class exists (it imports this
# module, so this one cannot import it back; these functions run only after both load).
Module: type = _NotLoaded


def map_submodules(value: Any, fn: Callable[[str, Any], Any], suffix: str = '') -> Any:
    """Apply ``fn(suffix, module)`` to every Module in lists, tuples and dicts of ``value``."""
    if isinstance(value, Module):
        return fn(suffix, value)
    if isinstance(value, (list, tuple)) and not _is_namedtuple(value):
        items = [map_submodules(v, fn, f'{suffix}_{i}') for i, v in enumerate(value)]
        return tuple(items)
    if isinstance(value, Mapping) and not isinstance(value, Scope):
        keys = list(value)
        try:
            # Visited in sorted key order, as JAX flattens a dict: of a module held
            # under two keys, the first key in that order names it.
            order = sorted(keys)
        except TypeError:
            order = keys
        mapped = {k: map_submodules(value[k], fn, f'{suffix}_{k}') for k in order}
        return type(value)({k: mapped[k] for k in keys})  # type: ignore[call-arg]
    return value


def clone_held_modules(fields: dict[str, Any], cache: dict, reset_names: bool) -> None:
    """Replace each Module that ``fields`` (a module's field values) hold with an
    unbound deep clone, whoever it is bound to, as Flax's ``clone(_deep_clone=True)``.

    Once each: ``cache`` (``{id(module): (module, clone)}``, shared down the clones)
    keeps a module held in two places one module. A clone keeps its name unless
    ``reset_names``.
    """
    renamed = {'name': None} if reset_names else {}

    def clone_once(_: str, m: Any) -> Any:
        entry = cache.get(id(m))
        if entry is None:
            clone = m.clone(parent=None, _deep_clone=cache, _reset_names=reset_names, **renamed)
            entry = cache[id(m)] = (m, clone)
        return entry[1]

    for key, value in fields.items():
        if might_hold_modules(value):
            mapped = map_submodules(value, clone_once)
            fields[key] = list(mapped) if isinstance(value, list) else mapped


def contains_module(value: Any) -> bool:
    """Whether ``value`` is, or nests in lists/tuples/dicts, a Module (no copies made)."""
    if isinstance(value, Module):
        return True
    if isinstance(value, (list, tuple)):
        return any(contains_module(v) for v in value)
    if isinstance(value, Mapping) and not isinstance(value, Scope):
        return any(contains_module(v) for v in value.values())
    return False


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, '_fields')


# The types freeze_attribute keeps as they are (Modules, arrays, ...): a caller tests
# `type(value) in KEPT_AS_IS` first, a set lookup instead of a call per attribute.
KEPT_AS_IS: set[type] = set()


def freeze_attribute(value: Any) -> Any:
    """``value`` as a bound Module holds it in a field or a setup attribute, as in Flax.

    Dicts (subclasses and FrozenDicts too) become FrozenDicts and lists tuples, all
    the way down through dicts, lists and tuples (a namedtuple keeps its type), so
    that a container cannot be changed after setup and hide a submodule from it
    (``self.layers['new'] = nn.Dense(2)`` raises). Other values are kept as they are.
    """
    if isinstance(value, (list, tuple)):
        items = [freeze_attribute(v) for v in value]
        return type(value)(*items) if _is_namedtuple(value) else tuple(items)
    if isinstance(value, (dict, FrozenDict)):
        return FrozenDict({k: freeze_attribute(v) for k, v in value.items()})
    KEPT_AS_IS.add(type(value))
    return value


_HOLDER_TYPES: dict[type, bool] = {}
# The types _HOLDER_TYPES maps to False (a set, for one C-level superset test).
NON_HOLDERS: set[type] = {int, float, bool, str, type(None), types.FunctionType}


def might_hold_modules(value: Any) -> bool:
    # Per type, once: the Mapping ABC check is slow and runs for every field of
    # every module on every first call.
    kind = type(value)
    holds = _HOLDER_TYPES.get(kind)
    if holds is None:
        holds = _HOLDER_TYPES[kind] = isinstance(value, (Module, list, tuple, dict, Mapping))
        if not holds:
            NON_HOLDERS.add(kind)
    return holds


# The key, in a binding's cache, of {id(original): (original, adopted clone)}.
_ADOPTED = '_linen_module_adopted'


def _adoption_cache(scope: Scope) -> dict[int, tuple[Any, Any]]:
    # Kept with the binding, dropped with it: the clones hold its scopes (and so
    # its variables, traced ones under a transform).
    shared = scope.binding_cache
    cache = shared.get(_ADOPTED)
    if cache is None:
        cache = shared[_ADOPTED] = {}
    return cache


def adopt_field_submodules(module: Any, d: dict) -> None:
    """Adopt the Modules held in ``module``'s fields, now that it has a scope.

    Done when the module is bound, before any method runs (as in Flax), so the
    order in which parents adopt a shared module does not depend on which method
    runs first, and ``bound.field`` is the bound submodule. The field keeps its
    original value in the state for ``clone``, which adopts it afresh.
    """
    holders = _HOLDER_TYPES
    non_holders = NON_HOLDERS
    cls = type(module)
    names, getter = cls._field_names, cls._field_getter
    # (the values in one C call; a single field's getter returns it twice)
    values = getter(d) if len(names) > 1 else (d[names[0]],) if names else ()
    for field_name, value in zip(names, values):
        kind = type(value)
        if kind in non_holders:
            continue
        if (kind is tuple or kind is list) and non_holders.issuperset(map(type, value)):
            # axes, feature tuples: plain values, no Module inside (a list is frozen)
            if kind is list:
                d[field_name] = tuple(value)
            continue
        holds = holders.get(kind)
        if holds is None:
            holds = might_hold_modules(value)
        if not holds:
            continue
        if contains_module(value):
            adopted = register_submodules(module, field_name, value)
            if adopted is not value:
                state = d['_state']
                if state.field_origins is None:
                    state.field_origins = {}
                state.field_origins[field_name] = value
            d[field_name] = freeze_attribute(adopted)
        else:
            d[field_name] = freeze_attribute(value)


def register_submodules(self: Any, name: str, value: Any) -> Any:
    """Attach the Modules in ``value`` (an attribute or field called ``name``) to self.

    A module made outside any module (``parent=None``) is cloned first, once per
    binding: the same object handed to two parents is one submodule, owned by
    the parent that adopts it first and shared by the other, as in Flax.
    """
    queue: list[Any] = []
    cache = _adoption_cache(self.scope)
    preserve = getattr(type(self), 'preserve_adopted_names', None)
    if preserve is None:
        preserve = config.linen_preserve_adopted_names

    def adopt(suffix: str, module: Any) -> Any:
        kept_name = None
        if module.parent is None:
            # Created outside any module: a clone belongs to this one. It is
            # named after the attribute unless the preserve_adopted_names flag
            # keeps a name it was given (config systems name modules so).
            if preserve:
                kept_name = module.__dict__['name']
            entry = cache.get(id(module))
            if entry is None:
                # (the original is kept alive with its clone: its id stays unique)
                entry = cache[id(module)] = (module, module.clone(parent=None, name=None))
            module = entry[1]
        # Unnamed modules (made in some setup, not attached yet) belong to the
        # module that holds them.
        if module.__dict__['name'] is None:
            module.__dict__['parent'] = self
            module.__dict__['name'] = kept_name or f'{name}{suffix}'
            queue.append(module)
        return module

    value = map_submodules(value, adopt)
    for module in queue:
        module.__post_init__()
    return value
