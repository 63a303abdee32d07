"""The compatibility table of docs/differences.md covers every public Flax name.

The names come from Flax itself (``dir()`` of each module, filtered to what the
module defines or, for the ``flax.linen``/``flax.core`` facades, re-exports from
Flax or JAX). Each must have a row; a row marked supported or differs must name
something linen really has.

Regenerate the rows (keeping the notes below) with
``python integration_tests/test_flax_compat_table.py``.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
import typing
from pathlib import Path

import pytest

pytest.importorskip('flax')
pytestmark = pytest.mark.flax

DOC = Path(__file__).resolve().parent.parent / 'docs' / 'differences.md'
BEGIN = '<!-- compat-table:begin -->'
END = '<!-- compat-table:end -->'

# Flax module -> where linen has its names.
NAMESPACES = {
    'flax.linen': 'linen.nn',
    'flax.core': 'linen.core',
    'flax.core.lift': 'linen.transforms.lift',
    'flax.core.meta': 'linen.core.meta',
    'flax.core.scope': 'linen.core.scope',
    'flax.struct': 'linen.core.struct',
    'flax.serialization': 'linen.core.serialization',
    'flax.traverse_util': 'linen.core.traverse_util',
    'flax.configurations': 'linen.core.config',
}
FACADES = {'flax.linen', 'flax.core'}


def flax_public_names(modname: str) -> list[str]:
    """The public names of a Flax module (the rule the table is checked against)."""
    module = importlib.import_module(modname)
    # Submodules Flax code imports explicitly (`from flax.linen import partitioning`)
    # appear in dir() only once imported: import them, so the list does not depend
    # on which tests ran first.
    if modname == 'flax.linen':
        importlib.import_module('flax.linen.partitioning')
    names = []
    for name in dir(module):
        if name.startswith('_'):
            continue
        value = getattr(module, name)
        if isinstance(value, typing.TypeVar):
            continue
        if isinstance(value, types.ModuleType):
            if value.__name__.startswith(modname + '.'):
                names.append(name)
            continue
        origin = getattr(value, '__module__', None) or ''
        if modname in FACADES:
            if origin.startswith('flax') or (origin.startswith('jax') and modname == 'flax.linen'):
                names.append(name)
        elif origin == modname:
            names.append(name)
    if modname == 'flax.configurations':
        import flax

        flags = [f'config.{n}' for n in dir(flax.config) if n.startswith(('flax_', 'nnx_'))]
        names = [n for n in names if n == 'Config']
        names += ['config.update', 'config.temp_flip_flag'] + flags
    return sorted(names)


def linen_has(linen_module: str, name: str) -> bool:
    obj: typing.Any = importlib.import_module(linen_module)
    for part in name.split('.'):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def table_entries() -> dict[str, dict[str, tuple[str, str]]]:
    """``{flax module: {name: (status, note)}}`` parsed from the table in the docs."""
    text = DOC.read_text()
    text = text[text.index(BEGIN) : text.index(END)]
    rows: dict[str, dict[str, tuple[str, str]]] = {}
    section = None
    for line in text.splitlines():
        heading = re.match(r'^### `([\w.]+)`', line)
        if heading:
            section = rows.setdefault(heading.group(1), {})
            continue
        row = re.match(r'^\| `([\w.]+)` \| (supported|differs|not supported) \| (.*) \|$', line)
        if row and section is not None:
            section[row.group(1)] = (row.group(2), row.group(3).strip())
    return rows


def table_rows() -> dict[str, dict[str, str]]:
    """``{flax module: {name: status}}`` parsed from the table in the docs."""
    return {
        module: {name: status for name, (status, _) in rows.items()}
        for module, rows in table_entries().items()
    }


@pytest.mark.parametrize('flax_module', list(NAMESPACES))
def test_every_flax_public_name_has_a_row(flax_module):
    rows = table_rows().get(flax_module, {})
    missing = [n for n in flax_public_names(flax_module) if n not in rows]
    assert not missing, f'{flax_module} names missing from docs/differences.md: {missing}'


@pytest.mark.parametrize('flax_module', list(NAMESPACES))
def test_supported_rows_name_something_linen_has(flax_module):
    linen_module = NAMESPACES[flax_module]
    rows = table_rows().get(flax_module, {})
    wrong = [
        n
        for n, status in rows.items()
        if status != 'not supported'
        and not linen_has(linen_module, n)
        # flax.core's transforms live in linen-transforms (core imports no sibling)
        and not (
            flax_module == 'flax.core'
            and (linen_has('linen.transforms.lift', n) or linen_has('linen.transforms', n))
        )
    ]
    assert not wrong, f'{flax_module} rows say supported but linen lacks: {wrong}'


@pytest.mark.parametrize('flax_module', sorted(FACADES))
def test_supported_submodules_import_by_their_flax_path(flax_module):
    # `from flax.linen.initializers import lecun_normal` migrates by swapping the
    # package prefix, as `import flax.linen as nn` does: each name that is a module of
    # Flax's package (and a supported row) must import under linen's, as that very
    # module, not only be an attribute of the facade.
    linen_module = NAMESPACES[flax_module]
    rows = table_rows().get(flax_module, {})
    flax_package, facade = map(importlib.import_module, (flax_module, linen_module))
    checked, wrong = [], []
    for name in flax_public_names(flax_module):
        if rows.get(name) == 'not supported' or not hasattr(facade, name):
            # (a name living elsewhere, `flax.core.lift` in linen-transforms, is
            # checked by the test above)
            continue
        if not isinstance(getattr(flax_package, name), types.ModuleType):
            continue
        checked.append(name)
        try:
            imported = importlib.import_module(f'{linen_module}.{name}')
        except ImportError as exc:
            wrong.append(f'{name}: {exc}')
            continue
        if imported is not getattr(facade, name):
            wrong.append(f'{name}: another module than the attribute')
    assert checked, f'no submodule of {flax_module} found: the check checks nothing'
    assert not wrong, f'{linen_module} submodules that do not import: {wrong}'


def rendered_table() -> str:
    """The table as ``compat_notes.py`` and Flax's names give it, markers included."""
    sys.path.insert(0, str(DOC.parent.parent / 'integration_tests'))
    from compat_notes import NOTES as notes

    lines = [BEGIN, '']
    for flax_module, linen_module in NAMESPACES.items():
        lines += [f'### `{flax_module}` → `{linen_module}`', '']
        lines += ['| name | status | notes |', '|---|---|---|']
        for name in flax_public_names(flax_module):
            status, note = notes.get(flax_module, {}).get(name, (None, ''))
            if status is None:
                here = flax_module == 'flax.traverse_util' or linen_has(linen_module, name)
                status = 'supported' if here else 'not supported'
                note = note or ('' if here else 'TODO')
            lines.append(f'| `{name}` | {status} | {note} |')
        lines.append('')
    lines.append(END)
    return '\n'.join(lines)


def test_the_tables_notes_are_compat_notes():
    # A note edited in the page alone is lost at the next regeneration (and one edited
    # in compat_notes.py alone never reaches the page): each row's status and note must
    # be what compat_notes.py gives. (Rows, not the whole table: the names come from
    # the installed Flax, which differs between the two JAX ends.)
    sys.path.insert(0, str(DOC.parent.parent / 'integration_tests'))
    from compat_notes import NOTES

    wrong = []
    for section, rows in table_entries().items():
        for name, (status, note) in rows.items():
            given = NOTES.get(section, {}).get(name)
            if given is None:
                if note not in ('', 'TODO'):
                    wrong.append(f'{section}.{name}: a note compat_notes.py lacks')
            elif (status, note) != given:
                wrong.append(f'{section}.{name}: not as compat_notes.py says')
    assert not wrong, (
        f'{wrong}: edit the note in integration_tests/compat_notes.py and run '
        '`python integration_tests/test_flax_compat_table.py`'
    )


def _regenerate() -> None:  # pragma: no cover - a maintenance script
    table = rendered_table()
    text = DOC.read_text()
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + table + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip() + '\n\n' + table + '\n'
    DOC.write_text(text)


if __name__ == '__main__':  # pragma: no cover
    _regenerate()
