"""A package's public names, written once, and every form derived from them.

Each linen distribution lists its public names in one :class:`NameTable`: the
module that defines each name, grouped by module. From that one table come

* the package's ``__all__``, its lazy module ``__getattr__`` and its ``__dir__``
  (:meth:`NameTable.install`), so ``import linen.layers`` stays cheap and each
  family of layers is imported on first use;
* what the distribution's plugin contributes to ``linen.nn``
  (:meth:`NameTable.exports`, returned from the ``linen_exports`` hook);
* the type stubs (``__init__.pyi`` of the package and of ``linen.nn``) and the
  table of first-party names behind ``linen.nn``'s install hints, written by
  ``tools/generate_names.py`` with :func:`render_stub`; a test fails when a
  generated file is not what the tables give today.

This module is part of linen-core's public contract with its siblings (and with
third-party packages that want the same): the names in ``__all__`` keep their
signature and meaning for a whole minor series (``0.1.x``); changing one needs a
new minor version and a CHANGELOG entry.

>>> from linen.core.name_table import NameTable
>>> table = NameTable('email', {'.message': ('Message',)}, submodules=('utils',))
>>> table.names
('Message', 'utils')
>>> table.targets['Message'], table.targets['utils']
('email.message:Message', 'email.utils')
>>> import email.message
>>> table.resolve('Message') is email.message.Message
True
>>> table.exports(['Message'])
{'Message': 'email.message:Message'}
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any

__all__ = ['NameTable', 'render_stub']


class NameTable:
    """The public names of one package and the module that defines each.

    Args:
        package: the package the names belong to (``'linen.layers'``).
        by_module: module -> the names it defines, each public under its own
            name. A module starting with ``.`` is relative to ``package``.
        submodules: public submodules, each reached as ``package.<name>``.
        aliases: public name -> ``'module:attribute'``, for a name that differs
            from the attribute it stands for (``register_plugin`` for
            ``._bus:register``).
        eager: the modules, spelled as in ``by_module`` (a submodule as
            ``'.name'``), whose names :meth:`install` binds at once, for names
            the package needs from the start; every other name is imported on
            first access.

    Raises:
        ValueError: a name is listed twice.
    """

    def __init__(
        self,
        package: str,
        by_module: Mapping[str, Iterable[str]],
        *,
        submodules: Iterable[str] = (),
        aliases: Mapping[str, str] | None = None,
        eager: Iterable[str] = (),
    ) -> None:
        self.package = package
        targets: dict[str, str] = {}

        def add(name: str, target: str) -> None:
            if name in targets:
                raise ValueError(
                    f'NameTable({package!r}): {name!r} is listed twice '
                    f'({targets[name]!r} and {target!r}); list each public name once.'
                )
            targets[name] = target

        for module, names in by_module.items():
            for name in names:
                add(name, f'{self._absolute(module)}:{name}')
        for name in submodules:
            add(name, f'{package}.{name}')
        for name, target in (aliases or {}).items():
            module, _, attr = target.partition(':')
            add(name, f'{self._absolute(module)}:{attr}' if attr else self._absolute(module))
        self.targets: Mapping[str, str] = targets
        self.names: tuple[str, ...] = tuple(sorted(targets))
        eager_modules = {self._absolute(m) for m in eager}
        self._eager = tuple(
            name for name, target in targets.items() if target.split(':')[0] in eager_modules
        )

    def _absolute(self, module: str) -> str:
        return self.package + module if module.startswith('.') else module

    def __contains__(self, name: object) -> bool:
        return name in self.targets

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f'NameTable({self.package!r}, {len(self)} names)'

    def defined_in(self, module: str) -> tuple[str, ...]:
        """The names of the table that ``module`` (relative when it starts with ``.``) defines.

        A public module's ``__all__`` can be this, when the module is one the
        table lists by name.
        """
        prefix = self._absolute(module) + ':'
        return tuple(n for n, t in self.targets.items() if t.startswith(prefix))

    def resolve(self, name: str) -> Any:
        """The object ``name`` stands for, importing its module.

        Raises:
            AttributeError: ``name`` is not in the table (with the message Python
                gives for a missing module attribute).
        """
        target = self.targets.get(name)
        if target is None:
            raise AttributeError(f'module {self.package!r} has no attribute {name!r}')
        module_name, _, attr = target.partition(':')
        value: Any = importlib.import_module(module_name)
        for part in filter(None, attr.split('.')):
            value = getattr(value, part)
        return value

    def install(self, namespace: MutableMapping[str, Any]) -> None:
        """Make ``namespace`` (the package's ``globals()``) serve the table.

        Sets ``__all__`` (``__version__``, when the package has one, and every
        name of the table), a module ``__getattr__`` that imports a name on first
        access and keeps it in the namespace, and ``__dir__``; binds the names of
        the ``eager`` modules at once.
        """
        public = ['__version__'] if '__version__' in namespace else []
        namespace['__all__'] = [*public, *self.names]

        def __getattr__(name: str) -> Any:
            value = self.resolve(name)
            namespace[name] = value
            return value

        def __dir__() -> list[str]:
            return list(namespace['__all__'])

        namespace['__getattr__'] = __getattr__
        namespace['__dir__'] = __dir__
        for name in self._eager:
            namespace[name] = self.resolve(name)

    def exports(self, names: Iterable[str] | None = None, **extra: str) -> dict[str, str]:
        """``name -> 'module:attribute'`` for the plugin's ``linen_exports`` hook.

        Args:
            names: the names of the table that ``linen.nn`` offers; all of them
                when ``None``.
            **extra: further names and their targets (``transforms='linen.transforms'``).

        Raises:
            KeyError: a name in ``names`` is not in the table.
        """
        chosen = self.names if names is None else tuple(names)
        missing = [n for n in chosen if n not in self.targets]
        if missing:
            raise KeyError(f'not in the NameTable of {self.package}: {missing}')
        return {**{n: self.targets[n] for n in chosen}, **extra}


def _stub_sort_key(name: str) -> tuple[int, str]:
    # isort's order within one module: CONSTANTS, then Classes, then the rest.
    if name.isupper() and len(name) > 1:
        kind = 0
    elif name[:1].isupper():
        kind = 1
    else:
        kind = 2
    return kind, name.lower()


def render_stub(
    docstring: str,
    imports: Iterable[tuple[str, str, str]],
    *,
    preamble: Iterable[str] = (),
    tail: str = '',
    line_length: int = 100,
) -> str:
    """The text of a ``.pyi`` stub that re-exports ``imports``.

    Args:
        docstring: the stub's docstring (one paragraph or more, no quotes).
        imports: ``(module, attribute, public name)`` triples; a submodule is
            ``(parent package, submodule, public name)``. A repeated triple is
            imported once; a private module (``_bus``) without ``as``.
        preamble: standard-library import lines the tail needs
            (``'from typing import Any'``).
        tail: text after the imports (declarations the stub needs besides them).
        line_length: the length at which an import is wrapped in parentheses.

    The imports come out in the order and layout ``ruff check --select I`` and
    ``ruff format`` give them, so the generated file is lint-clean as written.
    """
    unique = dict.fromkeys(imports)
    ordered = sorted(unique, key=lambda t: (t[0], _stub_sort_key(t[1]), t[2].lower()))
    lines = [f'"""{docstring.strip()}\n"""', '']
    preamble = sorted(preamble)
    if preamble:
        lines += [*preamble, '']
    for module, attr, name in ordered:
        # ``import a as a`` re-exports; a private helper module is imported plainly.
        alias = '' if name == attr and name.startswith('_') and not name.startswith('__') else name
        line = (
            f'from {module} import {attr} as {alias}' if alias else f'from {module} import {attr}'
        )
        if len(line) > line_length:
            line = f'from {module} import (\n    {attr} as {name},\n)'
        lines.append(line)
    text = '\n'.join(lines) + '\n'
    if tail:
        text += '\n' + tail.strip('\n') + '\n'
    return text
