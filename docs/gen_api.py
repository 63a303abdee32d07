"""The API reference, by the names users import: one page per public name.

``linen.nn`` (every name the first-party distributions export to it), then
``linen.core``, ``linen.training`` and ``linen.profiling`` (their ``__all__``).
Each page says which distribution provides the name and documents it with autodoc
under the name a user types (``linen.nn.Dense``, not where it is defined). Names
re-exported from JAX (``linen.nn.relu`` is ``jax.nn.relu``) get their signature
and a link to JAX's documentation; JAX's docstrings are JAX's to render.

The site build (``docs/_site_hooks.py``) writes the pages into
``docs/api/generated/`` before Sphinx reads the sources; nothing generated is
committed. ``python docs/gen_api.py`` writes them by hand (to look at the sources).
"""

from __future__ import annotations

import importlib
import inspect
import pprint
import re
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
OUT = DOCS / 'api' / 'generated'
JAX_DOCS = 'https://docs.jax.dev/en/latest/_autosummary/{}.html'

# (namespace, title, what it is). linen.nn's names come from the plugins' exports.
NAMESPACES = [
    ('linen.nn', 'The layers, transforms and Module of ``import linen.nn as nn``.'),
    ('linen.core', 'The functional core (``flax.core``): scopes, FrozenDict, metadata.'),
    ('linen.training', 'Train state (``pip install "linen-core[training]"``).'),
    ('linen.profiling', 'Profiling labels, cost and time reports, ``tabulate``.'),
]
# Public JAX namespaces searched for the documented path of a re-exported object.
_JAX_PUBLIC = [
    'jax',
    'jax.nn',
    'jax.nn.initializers',
    'jax.numpy',
    'jax.lax',
    'jax.random',
    'jax.sharding',
    'jax.typing',
]


@dataclass(frozen=True)
class Entry:
    """One public name: where users import it, what it is, who provides it."""

    namespace: str  # 'linen.nn'
    name: str  # 'Dense'
    obj: Any
    distribution: str  # 'linen-layers'
    stem: str = ''  # the page's file name, when it is not the name itself

    @property
    def fullname(self) -> str:
        return f'{self.namespace}.{self.name}'

    @property
    def kind(self) -> str:
        if inspect.ismodule(self.obj):
            return 'module'
        if jax_path(self.obj) is not None:
            return 'jax'
        if inspect.isclass(self.obj):
            return 'class'
        if callable(self.obj) and (inspect.isroutine(self.obj) or hasattr(self.obj, '__wrapped__')):
            return 'function'
        return 'data'

    @property
    def page(self) -> str:
        """The page's path under ``api/generated/`` (no suffix)."""
        return f'{self.namespace.removeprefix("linen.")}/{self.stem or self.name}'


def first_party() -> dict[str, str]:
    """``{'linen.layers': 'linen-layers', ...}``: each ``linen.<x>`` package of this repository."""
    owners = {}
    for pyproject in sorted(ROOT.glob('packages/*/pyproject.toml')):
        for package in sorted((pyproject.parent / 'src' / 'linen').iterdir()):
            if package.is_dir() and not package.name.startswith(('_', '.')):
                owners[f'linen.{package.name}'] = pyproject.parent.name
    return owners


def nn_providers() -> dict[str, str]:
    """``{name: distribution}`` for what the first-party plugins export to ``linen.nn``.

    Read through the public plugin protocol (the ``linen`` entry-point group and
    each plugin's ``linen_exports`` hook), the way ``linen.nn`` itself finds them;
    third-party plugins installed here are not part of this reference.
    """
    ours = set(first_party().values())
    providers = {}
    for ep in entry_points(group='linen'):
        if ep.dist is None or ep.dist.name not in ours:
            continue
        exports = getattr(ep.load(), 'linen_exports', None)
        for name in (exports() or {}) if exports else {}:
            providers[name] = ep.dist.name
    return providers


def entries() -> list[Entry]:
    """Every documented name, namespace by namespace, names sorted case-insensitively."""
    owners = first_party()
    found = []
    for namespace, _ in NAMESPACES:
        module = importlib.import_module(namespace)
        if namespace == 'linen.nn':
            providers = nn_providers()
            names = [n for n in dir(module) if n in providers]
        else:
            names = [n for n in module.__all__ if not n.startswith('_')]
            providers = dict.fromkeys(names, owners[namespace])
        lowered = [n.lower() for n in names]
        for name in sorted(names, key=lambda n: (n.lower(), n)):
            obj = getattr(module, name)
            # Two names that differ only in case (nn.Module and the submodule nn.module,
            # profiling.Roofline and profiling.roofline) would be one file on a
            # case-insensitive disk: the lower-case one's page gets a kind prefix.
            clash = lowered.count(name.lower()) > 1 and name[0].islower()
            entry = Entry(namespace, name, obj, providers[name])
            found.append(
                Entry(
                    namespace, name, obj, providers[name], f'{entry.kind}-{name}' if clash else ''
                )
            )
    return found


def jax_path(obj: Any) -> str | None:
    """The public dotted path JAX documents ``obj`` under, if it is JAX's."""
    defining = getattr(obj, '__module__', None) or ''
    if inspect.ismodule(obj) or defining.split('.')[0] not in {'jax', 'jaxlib'}:
        return None
    short = getattr(obj, '__name__', None)
    for namespace in _JAX_PUBLIC:
        module = importlib.import_module(namespace)
        if short and getattr(module, short, None) is obj:
            return f'{namespace}.{short}'
    # An object JAX does not expose by its own name (a partial, an instance).
    return 'jax'


_PRIVATE_JAX = re.compile(r'\b(?:jax\._src|jaxlib\._\w*)(?:\.\w+)+')


def public_jax_text(text: str) -> str:
    """``text`` with each private JAX path (``jax._src.mesh.Mesh``) by its public name.

    Annotations are rendered from the objects, and JAX's classes live in private
    modules (``jax.sharding.Mesh.__module__`` is ``jax._src.mesh``).
    """

    def public(match: re.Match) -> str:
        parts = match.group(0).split('.')
        for cut in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module('.'.join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                break
            path = jax_path(obj)
            if path and path != 'jax':
                return path
            # Type aliases (jax.typing.ArrayLike) have no name of their own.
            for namespace in _JAX_PUBLIC:
                if getattr(importlib.import_module(namespace), parts[-1], None) is obj:
                    return f'{namespace}.{parts[-1]}'
            break
        return f'jax.{parts[-1]}'

    return _PRIVATE_JAX.sub(public, text)


# ------------------------------------------------------------------ rendering


def _heading(text: str, char: str = '=') -> list[str]:
    return [text, char * len(text), '']


def _indent(text: str, by: str = '   ') -> list[str]:
    return [by + line if line.strip() else '' for line in text.splitlines()]


def docstring(obj: Any, name: str = '') -> str:
    """What documents ``obj``: its docstring, or for a constant the comment on its line.

    A constant (``DEVICE_PEAKS = {...}``) has no docstring of its own, and the one of
    its type (``dict``) is not about it: its documentation is the ``#:`` comment or
    string literal at its assignment, as autodoc reads it, in the module that binds it.
    """
    if inspect.ismodule(obj) or inspect.isclass(obj) or callable(obj):
        return inspect.getdoc(obj) or ''
    from sphinx.pycode import ModuleAnalyzer

    for module_name, module in sorted(sys.modules.items()):
        if not module_name.startswith('linen.') or vars(module).get(name, _MISSING) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(module_name).find_attr_docs()
        except Exception:
            continue
        if ('', name) in docs:
            return '\n'.join(docs['', name]).strip()
        comment = _comment_above(module, name)
        if comment:
            return comment
    if type(obj).__module__.startswith('linen.'):
        return inspect.getdoc(type(obj)) or ''
    return ''


_MISSING = object()


def _comment_above(module: Any, name: str) -> str:
    """The ``#`` comment lines right above ``name = ...`` in ``module``'s source."""
    try:
        lines = inspect.getsource(module).splitlines()
    except (OSError, TypeError):
        return ''
    assignment = re.compile(rf'^{re.escape(name)}\s*(:[^=]*)?=')
    for index, line in enumerate(lines):
        if assignment.match(line):
            comment = []
            while index > 0 and lines[index - 1].startswith('#'):
                index -= 1
                comment.insert(0, lines[index].lstrip('#').strip())
            return ' '.join(comment)
    return ''


def _summary(obj: Any, name: str = '') -> str:
    """The first sentence of ``obj``'s docstring, as escaped reST for a table cell."""
    first = docstring(obj, name).strip().split('\n\n')[0].replace('\n', ' ')
    # Roles and markup read fine as their plain text in a one-line summary.
    first = re.sub(r':[a-z:]+:`~?([^`]+)`', r'\1', first)
    first = first[:160] + ('…' if len(first) > 160 else '')
    # ``literals`` stay literals; elsewhere reST's markup characters are escaped
    # (``inclusive_`` would be a link target, ``*`` emphasis).
    parts = re.split(r'(``[^`]+``)', first)
    return ''.join(
        part if part.startswith('``') else re.sub(r'([\\*_|])', r'\\\1', part.replace('`', ''))
        for part in parts
    )


def _jax_signature(obj: Any) -> str:
    """``obj``'s signature; JAX's string annotations (``x: 'ArrayLike'``) lose their quotes."""
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return '(*args, **kwargs)'
    return re.sub(r"(: |-> )'([^']*)'", r'\1\2', text)


def render_entry(entry: Entry, documented: dict[int, Entry]) -> str:
    """The reST page of one name.

    An object importable under two names (``linen.nn.FrozenDict`` is
    ``linen.core.FrozenDict``) is documented on both pages; the first one
    (``linen.nn`` comes first) is the one cross-references and search point to.
    """
    first = documented.get(id(entry.obj))
    no_index = ['   :no-index:'] if first is not None and first is not entry else []
    lines = ['.. meta::', f'   :description: {entry.fullname}', '']
    lines += _heading(entry.fullname)
    lines += [
        f'Provided by the distribution **{entry.distribution}** '
        f'(see :doc:`installing subsets </installing>`).',
        '',
        f'.. currentmodule:: {entry.namespace}',
        '',
    ]
    obj, kind = entry.obj, entry.kind
    if kind == 'jax':
        path = jax_path(obj)
        url = JAX_DOCS.format(path) if path != 'jax' else 'https://docs.jax.dev/en/latest/'
        lines += [
            f'.. py:function:: {entry.name}{_jax_signature(obj)}'
            if callable(obj) and not inspect.isclass(obj)
            else f'.. py:class:: {entry.name}',
            '',
            f"   JAX's ``{path}``, re-exported as ``{entry.fullname}`` (the same object, as in "
            f"``flax.linen``). Its documentation is JAX's: `{path} <{url}>`__.",
            '',
        ]
        summary = _summary(obj)
        if summary:
            lines += [f'   *{summary}*' if '*' not in summary else f'   {summary}', '']
    elif kind == 'class':
        lines += [f'.. autoclass:: {entry.name}', '   :members:', *no_index, '']
        if '__call__' in vars(obj):
            lines[-1:-1] = ['   :special-members: __call__']
    elif kind == 'function':
        lines += [f'.. autofunction:: {entry.name}', *no_index, '']
    elif kind == 'module':
        lines += _module_body(entry, documented)
    else:
        value = repr(obj)
        shown = value if len(value) <= 60 else f'{type(obj).__name__}(...)'
        lines += [
            f'.. py:data:: {entry.name}',
            f'   :type: {type(obj).__module__}.{type(obj).__qualname__}'
            if type(obj).__module__ != 'builtins'
            else f'   :type: {type(obj).__qualname__}',
            f'   :value: {shown}',
            *no_index,
            '',
            *_indent(docstring(obj, entry.name)),
            '',
        ]
        if shown != value and len(value) <= 2000:
            lines += ['   The value:', '', '   .. code-block:: python', '']
            lines += [*_indent(pprint.pformat(obj, width=80, sort_dicts=False), '      '), '']
    return '\n'.join(lines).rstrip() + '\n'


def _module_body(entry: Entry, documented: dict[int, Entry]) -> list[str]:
    module = entry.obj
    # The docstring only: a module target here would outrank the class of the same
    # name in search (nn.module and nn.Module).
    lines = [f'.. automodule:: {module.__name__}', '   :no-index:', '']
    names = getattr(module, '__all__', None) or [
        n for n in vars(module) if not n.startswith('_') and not inspect.ismodule(vars(module)[n])
    ]
    names = [n for n in names if not n.startswith('_') and hasattr(module, n)]
    if not names:
        return lines
    lines += _heading(f'What ``{entry.fullname}`` holds', '-')
    lines += ['.. list-table::', '   :widths: 30 70', '']
    for name in sorted(names, key=str.lower):
        obj = getattr(module, name)
        same = documented.get(id(obj))
        label = f':doc:`{name} </api/generated/{same.page}>`' if same else f'``{name}``'
        if same is None and jax_path(obj) not in (None, 'jax'):
            label = f'`{name} <{JAX_DOCS.format(jax_path(obj))}>`__'
        lines += [f'   * - {label}', f'     - {_summary(obj, name) or " "}']
    return lines + ['']


def render_namespace(namespace: str, intro: str, members: list[Entry]) -> str:
    """The index page of one namespace: a table of its names and a toctree of their pages."""
    lines = _heading(f'``{namespace}``') + [intro, '']
    groups: dict[str, list[Entry]] = {}
    for entry in members:
        groups.setdefault(entry.distribution, []).append(entry)
    for distribution, group in sorted(groups.items()):
        lines += _heading(f'From {distribution}', '-')
        lines += ['.. list-table::', '   :widths: 30 70', '']
        for entry in group:
            lines += [
                f'   * - :doc:`{entry.name} <{entry.page}>`',
                f'     - {_summary(entry.obj, entry.name) or " "}',
            ]
        lines += ['']
    lines += ['.. toctree::', '   :hidden:', '']
    lines += [f'   {e.page}' for e in members]
    return '\n'.join(lines).rstrip() + '\n'


def pages() -> dict[str, str]:
    """``{path under api/generated/: reST text}`` for every page of the reference."""
    all_entries = entries()
    documented: dict[int, Entry] = {}
    for entry in all_entries:
        if entry.kind in {'class', 'function', 'data'}:
            documented.setdefault(id(entry.obj), entry)
    out = {}
    for namespace, intro in NAMESPACES:
        members = [e for e in all_entries if e.namespace == namespace]
        short = namespace.removeprefix('linen.')
        out[f'{short}.rst'] = render_namespace(namespace, intro, members)
        for entry in members:
            out[f'{entry.page}.rst'] = render_entry(entry, documented)
    return out


def write(out: Path = OUT) -> int:
    """Write every page afresh into ``out``; the folder ignores itself in git."""
    fresh = pages()
    if out.exists():
        for stale in out.rglob('*.rst'):
            if stale.relative_to(out).as_posix() not in fresh:
                stale.unlink()
    for path, text in fresh.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        # Unchanged pages keep their time stamp, so Sphinx rereads only what changed.
        if not target.is_file() or target.read_text(encoding='utf-8') != text:
            target.write_text(text, encoding='utf-8')
    (out / '.gitignore').write_text('# written by docs/gen_api.py at each build\n*\n')
    return len(list(out.rglob('*.rst')))


if __name__ == '__main__':
    print(f'wrote {write()} pages to {OUT}', file=sys.stderr)
