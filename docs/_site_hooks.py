"""The Sphinx extension of the site (``docs/conf.py`` loads it as ``_site_hooks``).

Before Sphinx reads the sources it writes what the site shows but the repository
does not hold:

- the API reference pages, one per public name (``docs/gen_api.py``), into
  ``docs/api/generated/``;
- each page's pictures, made by its own code: a page that links files under
  ``assets/generated/<page>/`` (see ``docs/_pages.py``) is run in a temporary
  directory and the files its code wrote are copied there, beside the page. The
  training curves of getting-started.md and the flame graph of profiling.md are
  drawn from the code shown next to them, at build time. A linked file the code
  did not write fails the build with the page and the file name.

Both folders ignore themselves in git. It also puts the navigation (``linen_nav`` in
conf.py) on the home page as hidden tables of contents, and draws math as MathML,
which browsers render with no script and no network.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import io
import shutil
import sys
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

_log = logging.getLogger(__name__)
DOCS = Path(__file__).resolve().parent


def _load(name: str, file: str):
    # docs/ is no package: its helpers are loaded by path, once.
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DOCS / file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve their module by name
        spec.loader.exec_module(module)
    return sys.modules[name]


def guide_pages(docs: Path = DOCS) -> list[Path]:
    return _load('_linen_docs_pages', '_pages.py').guide_pages(docs)


def write_generated_pictures(docs: Path = DOCS) -> dict[str, list[str]]:
    """Run each page that links generated files; copy what it wrote beside it."""
    pages = _load('_linen_docs_pages', '_pages.py')
    written: dict[str, list[str]] = {}
    for page in guide_pages(docs):
        folder = page.parent / pages.GENERATED
        # What the page prints (its tables) belongs on the page, not in the build log.
        with contextlib.redirect_stdout(io.StringIO()):
            generated = pages.build_generated(page)
        for uri, content in generated.items():
            target = page.parent / uri
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            (folder / '.gitignore').write_text('# written by docs/_site_hooks.py\n*\n')
        if generated:
            written[str(page.relative_to(docs))] = sorted(generated)
    return written


def _clear_generated_pictures(docs: Path) -> None:
    pages = _load('_linen_docs_pages', '_pages.py')
    for folder in docs.rglob(pages.GENERATED):
        if (folder / '.gitignore').is_file():
            shutil.rmtree(folder)


def _builder_inited(app) -> None:
    docs = Path(app.srcdir)
    if docs == DOCS:
        count = _gen_api().write()
        _log.info(f'[linen] {count} API pages written to api/generated/')
    _clear_generated_pictures(docs)
    for page, files in write_generated_pictures(docs).items():
        _log.info(f'[linen] {page}: generated {", ".join(files)}')


def navigation(docs: Path, nav: list[tuple[str, list[str]]]) -> str:
    """The hidden tables of contents (MyST) that make ``nav`` the site's sidebar.

    An entry is a page (left out while it does not exist) or a glob ending in ``*``,
    kept only while it matches a page no entry names (Sphinx warns on a glob that
    matches nothing, and a page listed by name stays where it is listed).
    """

    def exists(name: str) -> bool:
        return (docs / f'{name}.md').is_file() or (docs / f'{name}.rst').is_file()

    named = {entry for _, entries in nav for entry in entries if not entry.endswith('*')}
    blocks = []
    for caption, entries in nav:
        lines = []
        for entry in entries:
            if entry.endswith('*'):
                matches = {
                    p.relative_to(docs).with_suffix('').as_posix()
                    for suffix in ('.md', '.rst')
                    for p in docs.glob(entry + suffix)
                }
                if matches - named:
                    lines.append(entry)
            elif exists(entry):
                lines.append(entry)
        if lines:
            glob = ':glob:\n' if any(e.endswith('*') for e in lines) else ''
            body = '\n'.join(lines)
            blocks.append(
                f'\n\n```{{toctree}}\n:hidden:\n:caption: {caption}\n{glob}\n{body}\n```\n'
            )
    return ''.join(blocks)


def _source_read(app, docname: str, source: list[str]) -> None:
    if docname == app.config.root_doc:
        source[0] += navigation(Path(app.srcdir), app.config.linen_nav)


# ---------------------------------------------------------------- math as MathML


def _mathml(latex: str, display: bool) -> str:
    from latex2mathml.converter import convert

    return convert(latex.strip(), display='block' if display else 'inline')


def _visit_math(self, node) -> None:
    self.body.append(_mathml(node.astext(), display=False))
    raise nodes.SkipNode


def _visit_displaymath(self, node) -> None:
    # One MathML block per equation; `.. math::` may hold several, blank-line separated.
    equations = [eq for eq in node.astext().split('\n\n') if eq.strip()]
    self.body.append('<div class="math">')
    self.body.extend(_mathml(eq, display=True) for eq in equations)
    self.body.append('</div>')
    raise nodes.SkipNode


def _skip_foreign_member(app, what, name, obj, skip, options):
    """A field whose default is a JAX function (``activation_fn = jnp.tanh``) is no method.

    autodoc would document it as one, with JAX's docstring, as if it were the
    class's own; the class docstring's Attributes section describes the field.
    """
    if what == 'class' and callable(obj) and not inspect.isclass(obj):
        defining = getattr(obj, '__module__', None) or ''
        if defining.split('.')[0] in {'jax', 'jaxlib', 'numpy'}:
            return True
    return None


def _gen_api():
    return _load('_linen_docs_gen_api', 'gen_api.py')


def _public_jax_docstring(app, what, name, obj, options, lines) -> None:
    lines[:] = [_gen_api().public_jax_text(line) for line in lines]


def _public_jax_signature(app, what, name, obj, options, signature, return_annotation):
    fix = _gen_api().public_jax_text
    return (
        fix(signature) if signature else signature,
        fix(return_annotation) if return_annotation else return_annotation,
    )


@functools.cache
def _entries_by_object() -> dict[int, object]:
    found: dict[int, object] = {}
    for entry in _gen_api().entries():
        found.setdefault(id(entry.obj), entry)
    return found


def _import_dotted(path: str):
    parts = path.split('.')
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module('.'.join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _resolve_by_object(app, env, node, contnode):
    """A docstring's role names where a thing is defined (``linen.core._scope.Scope``,
    ``linen.layers.Dense``); the reference documents it under the name users import:
    link to that entry."""
    if node.get('refdomain') != 'py':
        return None
    target = node.get('reftarget', '').lstrip('~.')
    module = node.get('py:module')
    candidates = [f'{module}.{target}'] if module else []
    if target.startswith('jax.'):
        # JAX's own names link to JAX's documentation (the build has no network to
        # read JAX's inventory, and needs none: the page names follow the path).
        path = _gen_api().jax_path(_import_dotted(target))
        if path and path != 'jax':
            return nodes.reference(
                '', '', contnode, refuri=_gen_api().JAX_DOCS.format(path), internal=False
            )
        return None
    for path in [target, *candidates]:
        if not path.startswith('linen.'):
            continue
        obj = _import_dotted(path)
        entry = _entries_by_object().get(id(obj)) if obj is not None else None
        if entry is not None:
            from sphinx.util.nodes import make_refnode

            anchor = '' if entry.kind == 'module' else entry.fullname
            return make_refnode(
                app.builder,
                node['refdoc'],
                f'api/generated/{entry.page}',
                anchor,
                contnode,
                entry.fullname,
            )
    return None


def setup(app):
    app.connect('missing-reference', _resolve_by_object)
    app.setup_extension('sphinx.ext.autodoc')
    app.connect('autodoc-skip-member', _skip_foreign_member)
    # After napoleon (priority 500), which turns annotations into field types.
    app.connect('autodoc-process-docstring', _public_jax_docstring, priority=600)
    app.connect('autodoc-process-signature', _public_jax_signature, priority=600)
    app.add_config_value('linen_nav', [], 'env')
    app.connect('builder-inited', _builder_inited)
    app.connect('source-read', _source_read)
    app.add_html_math_renderer('mathml', (_visit_math, None), (_visit_displaymath, None))
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
