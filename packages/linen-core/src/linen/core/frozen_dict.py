"""An immutable, hashable mapping that is a JAX pytree, and helpers that accept dicts too.

``FrozenDict`` mirrors ``flax.core.FrozenDict``: nested mappings are stored as plain
dicts and handed out frozen, flattening visits keys in sorted order (so two dicts
with the same items give the same tree structure whatever their insertion order),
and the free functions ``freeze``, ``unfreeze``, ``copy``, ``pop`` and ``pretty_repr``
work on plain dicts as well, so code need not care which of the two it holds.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

import jax

__all__ = [
    'FrozenDict',
    'freeze',
    'unfreeze',
    'copy',
    'pop',
    'pretty_repr',
]


def _sorted_keys(d: Mapping) -> tuple:
    # Keys of mixed types cannot be sorted; insertion order is then the only
    # deterministic order left.
    try:
        return tuple(sorted(d))
    except TypeError:
        return tuple(d)


def _thaw_nested(value: Any) -> Any:
    """Turns every nested mapping node into a fresh plain dict (leaves are shared)."""
    if isinstance(value, FrozenDict):
        return {k: _thaw_nested(v) for k, v in value._dict.items()}
    if isinstance(value, dict):
        return {k: _thaw_nested(v) for k, v in value.items()}
    return value


class FrozenKeysView(KeysView):
    def __repr__(self):
        return f'frozen_dict_keys({list(self)})'


class FrozenValuesView(ValuesView):
    def __repr__(self):
        return f'frozen_dict_values({list(self)})'


class FrozenItemsView(ItemsView):
    def __repr__(self):
        return f'frozen_dict_items({list(self)})'


class FrozenDict(Mapping):
    """An immutable variant of a Python dict, registered as a JAX pytree.

    >>> d = FrozenDict({'b': 1, 'a': {'x': 2}})
    >>> d['a']['x']
    2
    >>> new, value = d.pop('b')
    >>> value, dict(new.unfreeze())
    (1, {'a': {'x': 2}})
    """

    __slots__ = ('_dict', '_hash')

    def __init__(self, *args, __unsafe_skip_copy__: bool = False, **kwargs):
        # The skip is for pytree unflattening: there the children may be arbitrary
        # objects (tracers, sentinels) that must be stored untouched.
        if __unsafe_skip_copy__:
            self._dict = dict(*args, **kwargs)
        else:
            self._dict = _thaw_nested(dict(*args, **kwargs))
        self._hash = None

    def __getitem__(self, key):
        value = self._dict[key]
        if isinstance(value, dict):
            return FrozenDict(value, __unsafe_skip_copy__=True)
        return value

    def __setitem__(self, key, value):
        raise ValueError('FrozenDict is immutable.')

    def __delitem__(self, key):
        raise ValueError('FrozenDict is immutable.')

    def __contains__(self, key) -> bool:
        return key in self._dict

    def __iter__(self) -> Iterator:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __repr__(self) -> str:
        return self.pretty_repr()

    def __eq__(self, other) -> bool:
        if isinstance(other, FrozenDict):
            return self._dict == other._dict
        if isinstance(other, Mapping):
            return self._dict == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            # Order-insensitive, like ==; nested dicts hash through their frozen view.
            self._hash = hash(frozenset((k, self[k]) for k in self._dict))
        return self._hash

    def __reduce__(self):
        return FrozenDict, (self.unfreeze(),)

    def keys(self) -> FrozenKeysView:
        """A view of the keys (printed as ``frozen_dict_keys([...])``, as in Flax)."""
        return FrozenKeysView(self)

    def values(self) -> FrozenValuesView:
        """A view of the values (printed as ``frozen_dict_values([...])``, as in Flax)."""
        return FrozenValuesView(self)

    def items(self) -> FrozenItemsView:
        """A view of the ``(key, value)`` pairs (printed as ``frozen_dict_items([...])``)."""
        return FrozenItemsView(self)

    def copy(self, add_or_replace: Mapping[str, Any] | None = None) -> FrozenDict:
        """Returns a new FrozenDict with the entries of ``add_or_replace`` added or replaced."""
        return type(self)({**self._dict, **unfreeze(add_or_replace or {})})

    def pop(self, key) -> tuple[FrozenDict, Any]:
        """Returns ``(a FrozenDict without key, the value under key)``; KeyError if absent."""
        value = self[key]
        rest = {k: v for k, v in self._dict.items() if k != key}
        return type(self)(rest, __unsafe_skip_copy__=True), value

    def unfreeze(self) -> dict:
        """Returns a mutable deep copy of the mapping structure (leaves are shared)."""
        return unfreeze(self)

    def pretty_repr(self, num_spaces: int = 4) -> str:
        """Returns an indented, one-entry-per-line representation."""
        return pretty_repr(self, num_spaces)

    def tree_flatten_with_keys(self):
        keys = _sorted_keys(self._dict)
        children = tuple((jax.tree_util.DictKey(k), self._dict[k]) for k in keys)
        return children, keys

    def tree_flatten(self):
        keys = _sorted_keys(self._dict)
        return tuple(self._dict[k] for k in keys), keys

    @classmethod
    def tree_unflatten(cls, keys, values):
        return cls(dict(zip(keys, values)), __unsafe_skip_copy__=True)


jax.tree_util.register_pytree_with_keys(
    FrozenDict,
    FrozenDict.tree_flatten_with_keys,
    FrozenDict.tree_unflatten,
    FrozenDict.tree_flatten,
)


def freeze(xs: Mapping[Any, Any]) -> FrozenDict:
    """Returns a frozen copy of a (nested) mapping."""
    return FrozenDict(xs)


def unfreeze(x: Any) -> Any:
    """Returns a nested plain-dict copy of a FrozenDict or dict; other values pass through.

    As in Flax, a FrozenDict comes back with its keys in sorted order (its pytree
    order) and a plain dict keeps its insertion order.
    """
    if isinstance(x, FrozenDict):
        return {k: unfreeze(x._dict[k]) for k in _sorted_keys(x._dict)}
    if isinstance(x, dict):
        return {k: unfreeze(v) for k, v in x.items()}
    return x


def copy(x: Mapping, add_or_replace: Mapping[str, Any] | None = None) -> Mapping:
    """Copies ``x`` with ``add_or_replace`` merged in; a dict gives a dict, a FrozenDict a FrozenDict."""
    add_or_replace = add_or_replace or {}
    if isinstance(x, FrozenDict):
        return x.copy(add_or_replace)
    if isinstance(x, dict):
        new = unfreeze(x)
        new.update(unfreeze(add_or_replace))
        return new
    raise TypeError(f'copy expects a dict or FrozenDict, got {type(x).__name__}.')


def pop(x: Mapping, key) -> tuple[Mapping, Any]:
    """Returns ``(x without key, x[key])`` without mutating ``x``; works on dicts too."""
    if isinstance(x, FrozenDict):
        return x.pop(key)
    if isinstance(x, dict):
        new = dict(x)
        value = new.pop(key)
        return new, value
    raise TypeError(f'pop expects a dict or FrozenDict, got {type(x).__name__}.')


def pretty_repr(x: Any, num_spaces: int = 4) -> str:
    """Returns an indented representation of a (nested) mapping; other values use ``repr``.

    >>> print(pretty_repr({'a': 1, 'b': {}}))
    {
        a: 1,
        b: {},
    }
    """
    if not isinstance(x, Mapping):
        return repr(x)

    def render(value: Any, depth: int) -> str:
        if not isinstance(value, Mapping):
            # Multi-line reprs (arrays) keep their shape by indenting every line.
            return repr(value).replace('\n', '\n' + ' ' * (num_spaces * depth))
        if not value:
            return '{}'
        items = value._dict.items() if isinstance(value, FrozenDict) else value.items()
        pad = ' ' * (num_spaces * (depth + 1))
        rows = [f'{pad}{k}: {render(v, depth + 1)},' for k, v in items]
        return '{\n' + '\n'.join(rows) + '\n' + ' ' * (num_spaces * depth) + '}'

    body = render(x, 0)
    return f'FrozenDict({body})' if isinstance(x, FrozenDict) else body
