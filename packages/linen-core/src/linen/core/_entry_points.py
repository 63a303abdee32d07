"""The entry points of one group, read from the distributions on ``sys.path``.

``importlib.metadata.entry_points(group=...)`` makes a ``Distribution`` of every
installed distribution and parses every entry point each declares, to keep one
group's: ~6 ms with 55 distributions installed, the largest part of the first
``linen.nn`` attribute. :func:`entry_points` reads the same folders with plain
``os`` calls and parses only the ``entry_points.txt`` files that declare the
group. It follows importlib's rules: ``*.dist-info`` and ``*.egg-info`` folders of
each directory on ``sys.path``, in order; a distribution name met again further
down the path (normalized as importlib does) is shadowed.

Only plain directories are read here (what pip and uv install into). A zip file or
an ``.egg`` on the path, or a finder of distributions besides the standard path
finder on ``sys.meta_path``, hands the whole answer to ``importlib.metadata``.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

__all__ = ['Found', 'entry_points']

_SEPARATORS = re.compile(r'[-_.]+')


class Found(NamedTuple):
    """An entry point and the distribution that declares it (``None`` if unknown)."""

    entry_point: metadata.EntryPoint
    distribution: metadata.Distribution | None


def entry_points(group: str) -> list[Found]:
    """The entry points of ``group`` with their distributions, in importlib's order."""
    found = _read_directories(group)
    if found is None:
        return [Found(ep, getattr(ep, 'dist', None)) for ep in metadata.entry_points(group=group)]
    return found


def _read_directories(group: str) -> list[Found] | None:
    # None: something on the path only importlib.metadata can read.
    if any(
        hasattr(finder, 'find_distributions') and finder is not importlib.machinery.PathFinder
        for finder in sys.meta_path
    ):
        return None
    header = f'[{group}]'
    seen: set[str] = set()
    found: list[Found] = []
    for root in sys.path:
        if not isinstance(root, str) or root.lower().endswith('.egg'):
            return None
        try:
            children = os.listdir(root or os.getcwd())
        except OSError:
            if os.path.isfile(root):
                return None  # a zip file: its distributions are importlib's to read
            continue  # a directory that does not exist lists nothing, as in importlib
        for name, child in _metadata_folders(children):
            if name in seen:
                continue  # shadowed by the same distribution earlier on the path
            seen.add(name)
            folder = os.path.join(root, child)
            try:
                with open(os.path.join(folder, 'entry_points.txt'), encoding='utf-8') as file:
                    text = file.read()
            except OSError:
                continue
            if header in text:
                dist = metadata.PathDistribution(Path(folder))
                found.extend(Found(ep, dist) for ep in _parse(text, group))
    return found


def _metadata_folders(children: list[str]) -> list[tuple[str, str]]:
    """``(normalized name, folder)`` of a directory's metadata folders, in importlib's order.

    importlib groups them by distribution name, in the order each name first
    appears in the listing; the name is the folder's up to its first ``-``.
    """
    groups: dict[str, list[str]] = {}
    for child in children:
        low = child.lower()
        if low.endswith(('.dist-info', '.egg-info')):
            name = _SEPARATORS.sub('_', low.rpartition('.')[0].partition('-')[0])
            groups.setdefault(name, []).append(child)
    return [(name, child) for name, members in groups.items() for child in members]


def _parse(text: str, group: str) -> list[metadata.EntryPoint]:
    # The format importlib reads: `[section]` lines and `name = value` lines; blank
    # lines and `#` comments are skipped.
    section = None
    found = []
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith('#'):
            continue
        if line.startswith('[') and line.endswith(']'):
            section = line.strip('[]')
        elif section == group and '=' in line:
            name, _, value = line.partition('=')
            found.append(metadata.EntryPoint(name.strip(), value.strip(), group))
    return found
