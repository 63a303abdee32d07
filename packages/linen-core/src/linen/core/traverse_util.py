"""Flatten, unflatten and map nested variable dicts by path (API of ``flax.traverse_util``).

Training scripts use these to build optimizer masks (weight decay on kernels only),
to rename or inspect parameters, and to move checkpoints between layouts. A path is
the tuple of keys from the root to a leaf; with ``sep`` it is those keys joined into
one string.

>>> params = {'Dense_0': {'kernel': 1, 'bias': 2}, 'scale': 3}
>>> flatten_dict(params)
{('Dense_0', 'kernel'): 1, ('Dense_0', 'bias'): 2, ('scale',): 3}
>>> flatten_dict(params, sep='/')
{'Dense_0/kernel': 1, 'Dense_0/bias': 2, 'scale': 3}
>>> unflatten_dict(flatten_dict(params)) == params
True
>>> path_aware_map(lambda path, x: 'decay' if path[-1] == 'kernel' else 'none', params)
{'Dense_0': {'kernel': 'decay', 'bias': 'none'}, 'scale': 'none'}
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from linen.core.errors import TraversalSetValuesCountError, TraverseInputTypeError
from linen.core.frozen_dict import FrozenDict

__all__ = [
    'empty_node',
    'flatten_dict',
    'unflatten_dict',
    'path_aware_map',
    'ModelParamTraversal',
]

Path = tuple[Any, ...]


class _EmptyNode:
    """The placeholder ``flatten_dict(..., keep_empty_nodes=True)`` puts for ``{}``."""

    _instance: _EmptyNode | None = None

    def __new__(cls):
        # One instance, so `value is empty_node` holds also after copy/pickle.
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self):
        return (_EmptyNode, ())

    def __repr__(self) -> str:
        return 'empty_node'


empty_node = _EmptyNode()


def _is_dict(x: Any) -> bool:
    return isinstance(x, (dict, FrozenDict))


def _require_dict(xs: Any, function: str, fix: str) -> None:
    if not _is_dict(xs):
        raise TraverseInputTypeError(
            f'traverse_util.{function} expects a dict or FrozenDict, got {type(xs).__name__}. {fix}'
        )


def flatten_dict(
    xs: Mapping,
    keep_empty_nodes: bool = False,
    is_leaf: Callable[[Path, Any], bool] | None = None,
    sep: str | None = None,
) -> dict:
    """The leaves of a nested dict, keyed by their path.

    Args:
        xs: a nested ``dict`` or ``FrozenDict``.
        keep_empty_nodes: keep an empty sub-dict as the leaf :data:`empty_node`
            (so that :func:`unflatten_dict` restores it); by default it vanishes.
        is_leaf: ``is_leaf(path, value)`` returning True stops the descent into a
            sub-dict, which then becomes a leaf itself.
        sep: when given, the paths are ``sep``-joined strings instead of tuples.

    Returns:
        A flat ``dict`` in the insertion order of ``xs`` (depth first).

    Raises:
        TraverseInputTypeError: ``xs`` is not a dict or FrozenDict.

    >>> flatten_dict({'a': {'b': 1, 'c': {}}}, keep_empty_nodes=True)
    {('a', 'b'): 1, ('a', 'c'): empty_node}
    >>> flatten_dict({'a': {'b': 1}}, is_leaf=lambda path, x: path == ('a',))
    {('a',): {'b': 1}}
    """
    _require_dict(xs, 'flatten_dict', 'Pass the variables dict, e.g. variables["params"].')
    flat: dict = {}

    def key_of(path: Path):
        return path if sep is None else sep.join(path)

    def visit(node: Any, path: Path) -> None:
        if not _is_dict(node) or (is_leaf is not None and is_leaf(path, node)):
            flat[key_of(path)] = node
            return
        if not node:
            # The root itself is never a leaf: an empty input flattens to {}.
            if keep_empty_nodes and path:
                flat[key_of(path)] = empty_node
            return
        for key, value in node.items():
            visit(value, (*path, key))

    visit(xs, ())
    return flat


def unflatten_dict(xs: Mapping, sep: str | None = None) -> dict:
    """The nested dict that :func:`flatten_dict` flattened into ``xs``.

    Args:
        xs: a flat dict keyed by tuples (or by ``sep``-joined strings).
        sep: the separator the keys were joined with, or None for tuple keys.

    Returns:
        A nested ``dict``; :data:`empty_node` leaves become ``{}``.

    Raises:
        TraverseInputTypeError: ``xs`` is not a dict, or a key is not a tuple
            (or a string when ``sep`` is given).

    >>> unflatten_dict({'a/b': 1, 'c': 2}, sep='/')
    {'a': {'b': 1}, 'c': 2}
    """
    _require_dict(xs, 'unflatten_dict', 'Pass the flat dict that flatten_dict returned.')
    nested: dict = {}
    for key, value in xs.items():
        if sep is not None:
            if not isinstance(key, str):
                raise TraverseInputTypeError(
                    f'traverse_util.unflatten_dict(sep={sep!r}) expects string keys, got the '
                    f'key {key!r}. Pass sep=None for tuple keys.'
                )
            path = tuple(key.split(sep))
        elif isinstance(key, tuple) and key:
            path = key
        else:
            raise TraverseInputTypeError(
                f'traverse_util.unflatten_dict expects non-empty tuple keys, got the key '
                f'{key!r}. Pass sep=... if the keys are joined strings.'
            )
        node = nested
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = {} if value is empty_node else value
    return nested


def path_aware_map(f: Callable[[Path, Any], Any], nested_dict: Mapping) -> dict:
    """Maps ``f(path, leaf)`` over the leaves of a nested dict, keeping its structure.

    Empty sub-dicts are kept. The typical use is an optimizer mask or label tree:
    ``optax.multi_transform(..., path_aware_map(lambda p, _: p[-1], params))``.

    Args:
        f: called with the tuple path and the value of every leaf.
        nested_dict: a nested ``dict`` or ``FrozenDict``.

    Returns:
        A nested ``dict`` of the results.
    """
    flat = flatten_dict(nested_dict, keep_empty_nodes=True)
    return unflatten_dict(
        {path: value if value is empty_node else f(path, value) for path, value in flat.items()}
    )


class ModelParamTraversal:
    """Selects the parameters whose ``'/a/b/kernel'`` path passes a filter.

    Flax has deprecated its traversals in favour of optax masks (for which
    :func:`path_aware_map` is the tool); this one is here so that older training
    scripts run unchanged. It warns no deprecation.

    Args:
        filter_fn: ``filter_fn(path, value)`` with ``path`` the ``'/'``-joined keys
            prefixed by ``'/'``; True selects the parameter.

    >>> traversal = ModelParamTraversal(lambda path, _: path.endswith('kernel'))
    >>> params = {'Dense_0': {'kernel': 1, 'bias': 2}}
    >>> list(traversal.iterate(params))
    [1]
    >>> traversal.update(lambda x: x * 10, params)
    {'Dense_0': {'bias': 2, 'kernel': 10}}
    """

    def __init__(self, filter_fn: Callable[[str, Any], bool]):
        self._filter_fn = filter_fn

    def _selected(self, params: Mapping, keep_empty_nodes: bool):
        _require_dict(
            params,
            'ModelParamTraversal',
            'It traverses a nested dict of parameters, e.g. variables["params"].',
        )
        # Sorted by path, as Flax does, so iterate/set see the same order.
        flat = flatten_dict(params, keep_empty_nodes=keep_empty_nodes)
        for path, value in sorted(flat.items(), key=lambda item: item[0]):
            chosen = value is not empty_node and self._filter_fn('/' + '/'.join(path), value)
            yield path, value, chosen

    def iterate(self, inputs: Mapping) -> Iterator[Any]:
        """Yields the selected parameters, in sorted path order."""
        for _, value, chosen in self._selected(inputs, keep_empty_nodes=False):
            if chosen:
                yield value

    def update(self, fn: Callable[[Any], Any], inputs: Mapping) -> Mapping:
        """A copy of ``inputs`` with ``fn`` applied to the selected parameters.

        A ``FrozenDict`` input gives a ``FrozenDict``, a ``dict`` a ``dict``.
        """
        flat = {
            path: fn(value) if chosen else value
            for path, value, chosen in self._selected(inputs, keep_empty_nodes=True)
        }
        nested = unflatten_dict(flat)
        return FrozenDict(nested) if isinstance(inputs, FrozenDict) else nested

    def set(self, values: list, inputs: Mapping) -> Mapping:
        """A copy of ``inputs`` with the selected parameters replaced by ``values``, in order.

        Raises:
            TraversalSetValuesCountError: ``values`` has fewer or more items than selected parameters.
        """
        remaining = list(values)

        def take(_):
            if not remaining:
                raise TraversalSetValuesCountError(
                    f'ModelParamTraversal.set got {len(values)} values, fewer than the '
                    'parameters its filter selects; pass one value per selected parameter.'
                )
            return remaining.pop(0)

        result = self.update(take, inputs)
        if remaining:
            raise TraversalSetValuesCountError(
                f'ModelParamTraversal.set got {len(values)} values, {len(remaining)} more than '
                'the parameters its filter selects; pass one value per selected parameter.'
            )
        return result
