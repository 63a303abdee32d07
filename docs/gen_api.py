"""Writes the API reference pages ``docs/api/*.md`` from each distribution's ``__all__``.

Run ``python docs/gen_api.py`` after changing a public surface; ``nox -s docs`` runs
it before building, and ``docs/test_api_pages.py`` fails when the committed pages
are out of date. Each public name becomes a mkdocstrings ``:::`` directive pointing
at the module that defines it (lazy re-exports resolve there), so the reference
shows every public name of every distribution and nothing private by name.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

API = Path(__file__).resolve().parent / 'api'

# (page, title, public modules documented on it, intro)
PAGES = [
    ('core.md', 'linen-core: linen.core', ['linen.core'], 'The functional core (`flax.core`).'),
    (
        'core-modules.md',
        'linen-core: submodules',
        [
            'linen.core.frozen_dict',
            'linen.core.struct',
            'linen.core.serialization',
            'linen.core.traverse_util',
            'linen.core.meta',
            'linen.core.spmd',
            'linen.core.config',
        ],
        'The public submodules of `linen.core`.',
    ),  # fmt: skip
    ('errors.md', 'linen-core: linen.core.errors', ['linen.core.errors'], 'Every typed error.'),
    ('training.md', 'linen-core[training]: linen.training', ['linen.training'], 'Train state.'),
    (
        'module.md',
        'linen-module: linen.module',
        ['linen.module'],
        'The `Module` class and friends.',
    ),
    (
        'transforms.md',
        'linen-transforms: linen.transforms',
        ['linen.transforms'],
        'Lifted transforms.',
    ),
    ('layers.md', 'linen-layers: linen.layers', ['linen.layers'], 'The layer set.'),
    (
        'profiling.md',
        'linen-profiling: linen.profiling',
        ['linen.profiling'],
        'Labels and reports.',
    ),
]


def _target(module_name: str, name: str) -> str:
    """The dotted path mkdocstrings should load for ``module_name.name``."""
    module = importlib.import_module(module_name)
    obj = getattr(module, name)
    if inspect.ismodule(obj):
        return obj.__name__
    defining = getattr(obj, '__module__', None)
    qualname = getattr(obj, '__qualname__', None)
    if (inspect.isclass(obj) or inspect.isfunction(obj)) and defining and qualname == name:
        return f'{defining}.{qualname}'
    # Constants, aliases (FlaxError = LinenError) and instances: where a module binds
    # them in its source. A lazy re-export (module __getattr__) binds nothing
    # statically, so look for the sibling module that holds the same object.
    package = module_name.split('.')[0] + '.'
    for other_name, other in sorted(sys.modules.items()):
        if other_name == module_name or not other_name.startswith(package) or other is None:
            continue
        if vars(other).get(name, _MISSING) is obj and f'{name} =' in _source(other):
            return f'{other_name}.{name}'
    return f'{module_name}.{name}'


_MISSING = object()


def _source(module) -> str:
    try:
        return inspect.getsource(module)
    except (OSError, TypeError):
        return ''


def render(
    title: str, modules: list[str], intro: str, seen: dict[str, str], current_page: str
) -> str:
    """One page; ``seen`` maps targets already documented to their page (one anchor each)."""
    lines = [f'# {title}', '', intro, '']
    for module_name in modules:
        module = importlib.import_module(module_name)
        names = [n for n in module.__all__ if not n.startswith('__')]
        if len(modules) > 1:
            lines += [f'## `{module_name}`', '']
        for name in sorted(names, key=str.lower):
            target = _target(module_name, name)
            external = getattr(getattr(module, name), '__module__', None) or ''
            if not inspect.ismodule(getattr(module, name)) and external.split('.')[0] in {
                'jax',
                'jaxlib',
                'numpy',
            }:
                # Re-exported JAX functions (activations, initializers) are JAX's to
                # document; griffe would have to load all of JAX to render them.
                qualname = getattr(getattr(module, name), '__qualname__', name)
                # JAX moves its own classes between private modules from release to
                # release (jax.Array lives in jaxlib._jax on 0.12): name the public path
                # when there is one, so the page is the same on every supported JAX.
                import jax

                # (On JAX 0.10 jax.Array's __qualname__ is itself 'jaxlib._jax.Array'.)
                short = qualname.rsplit('.', 1)[-1]
                if getattr(jax, short, None) is getattr(module, name):
                    external, qualname = 'jax', short
                lines += [f'### `{module_name}.{name}`', '', f"JAX's `{external}.{qualname}`.", '']
                continue
            if inspect.ismodule(getattr(module, name)):
                lines += [f'### `{module_name}.{name}`', '', f'The submodule `{target}`.', '']
                continue
            if target in seen:
                page = seen[target]
                lines += [
                    f'### `{module_name}.{name}`',
                    '',
                    f'See [`{target}`]({page}#{target}).',
                    '',
                ]
                continue
            seen[target] = current_page
            lines += [
                f'### `{module_name}.{name}`',
                '',
                f'::: {target}',
                '    options:',
                '      show_root_heading: false',
                '      show_source: false',
                '',
            ]
    return '\n'.join(lines).rstrip() + '\n'


def pages() -> dict[str, str]:
    seen: dict[str, str] = {}
    out = {}
    for page, title, modules, intro in PAGES:
        out[page] = render(title, modules, intro, seen, page)
    return out


def main() -> None:
    API.mkdir(exist_ok=True)
    for page, text in pages().items():
        (API / page).write_text(text, encoding='utf-8')
    print(f'wrote {len(PAGES)} pages to {API}', file=sys.stderr)


if __name__ == '__main__':
    main()
