"""Every page of the built site, opened in headless Chromium, looks like documentation.

A strict build says nothing about what a reader sees: a fence the Markdown
extension did not recognise renders as run-together paragraphs, a reST role in a
docstring prints as ``:func:`x```, a re-exported JAX function can show as a
``jax._src`` path. This test serves the built site on the loopback interface,
opens each HTML page in Debian's Chromium (driven by Playwright, with no browser
download) and fails, naming the page, on:

- raw Markdown fences or reST roles/directives in the rendered text;
- a fenced block of a guide page, or a ``>>>`` example, that did not render as code;
- a ``jax._src...`` path anywhere on a page;
- an API entry with no text;
- a console error, an uncaught script error, a failed request, or any request that
  leaves the machine (the site must work offline: no web fonts, no CDN scripts);
- a link to a page or an anchor that does not exist;
- a search for a public name whose first result is not that name's entry.

It runs in ``nox -s docs`` after the build (``LINEN_DOCS_SITE`` names the built
site there; ``docs/conftest.py`` collects this file only then), which installs
Chromium when it is missing. Run by hand::

    python -m sphinx -W -b html docs site && LINEN_DOCS_SITE=site python -m pytest docs/test_browser.py
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

import pytest

DOCS = Path(__file__).resolve().parent
SITE = Path(os.environ.get('LINEN_DOCS_SITE', DOCS.parent / 'site')).resolve()
CHROMIUM = os.environ.get('LINEN_CHROMIUM') or shutil.which('chromium') or '/usr/bin/chromium'
# Flags for a headless run in a container with no network: no sandbox (root), no
# GPU, and none of Chromium's own calls home.
CHROMIUM_ARGS = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
]

# Markup that means a source was not rendered. Roles: :func:`x`, :py:class:`x`.
_ROLE = re.compile(r':(?:py:)?(?:func|class|meth|attr|mod|data|obj|exc|const|ref|doc|math):`')
_DIRECTIVE = re.compile(r'^\s*\.\. (?:math|note|warning|code-block|autoclass)::', re.MULTILINE)
_FENCE = re.compile(r'^\s*(```|~~~)', re.MULTILINE)
# What a reader sees of a page: the article, without the sidebar and the footer.
_MAIN = 'article[role=main], div[role=main], main, body'

# Names whose search must land on their own API entry first (each a classic
# confusion: a longer name that contains it, a guide page that uses it often).
SEARCH_NAMES = ['BatchNorm', 'Dense', 'Conv', 'Module', 'remat', 'relu', 'scan', 'FrozenDict']


def _load_pages():
    name = '_linen_docs_pages'
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DOCS / '_pages.py')
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@dataclass
class Page:
    """What the browser saw on one page."""

    path: str  # relative to the site root, e.g. 'api/generated/nn/Dense.html'
    text: str = ''  # rendered text of the article, code blocks left out
    all_text: str = ''  # rendered text of the article, code included
    pre_blocks: int = 0
    prompt_paragraphs: list[str] = field(default_factory=list)
    empty_entries: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


# Runs in the page: the facts the checks need, in one round trip.
_COLLECT = """(selector) => {
  const main = document.querySelector(selector);
  const clone = main.cloneNode(true);
  clone.querySelectorAll('pre, script, style, .headerlink').forEach(e => e.remove());
  const hidden = document.createElement('div');
  hidden.style.position = 'absolute'; hidden.style.left = '-99999px';
  hidden.appendChild(clone); document.body.appendChild(hidden);
  const text = clone.innerText; hidden.remove();
  const entries = [...main.querySelectorAll('dl.py > dt[id]')].filter(dt => {
    const dd = dt.parentElement.querySelector(':scope > dd');
    return !dd || !dd.innerText.trim();
  }).map(dt => dt.id);
  return {
    text: text,
    all_text: main.innerText,
    pre: main.querySelectorAll('pre').length,
    prompts: [...main.querySelectorAll('p')].map(p => p.innerText.trim())
      .filter(t => t.startsWith('>>> ')),
    empty: entries,
    ids: [...document.querySelectorAll('[id]')].map(e => e.id)
      .concat([...document.querySelectorAll('a[name]')].map(e => e.name)),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  };
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope='module')
def server():
    assert (SITE / 'index.html').is_file(), (
        f'no built site at {SITE}: build it first (python3 -m nox -s docs does), '
        'or set LINEN_DOCS_SITE'
    )
    handler = functools.partial(_Quiet, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{httpd.server_address[1]}/'
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope='module')
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).is_file(), (
        f'Chromium not found at {CHROMIUM}: apt-get install chromium '
        '(python3 -m nox -s docs installs it), or set LINEN_CHROMIUM'
    )
    profile = tmp_path_factory.mktemp('chromium-profile')
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={'width': 1280, 'height': 900},
        )
        yield context
        context.close()


def _visit(context, base: str, path: str) -> Page:
    page = context.new_page()
    seen = Page(path)

    def leave_machine(route):
        seen.errors.append(f'request to the network: {route.request.url}')
        route.abort()

    page.route(re.compile(r'^(?!' + re.escape(base) + r'|data:|blob:|about:)'), leave_machine)
    page.on(
        'console',
        lambda msg: (
            seen.errors.append(f'console {msg.type}: {msg.text}')
            if msg.type in {'error', 'warning'}
            else None
        ),
    )
    page.on('pageerror', lambda exc: seen.errors.append(f'script error: {exc}'))
    page.on(
        'requestfailed',
        lambda req: seen.errors.append(f'request failed: {req.url} ({req.failure})'),
    )
    page.on(
        'response',
        lambda resp: (
            seen.errors.append(f'HTTP {resp.status}: {resp.url}') if resp.status >= 400 else None
        ),
    )
    page.goto(base + path, wait_until='load')
    facts = page.evaluate(_COLLECT, _MAIN)
    page.close()
    seen.text, seen.all_text = facts['text'], facts['all_text']
    seen.pre_blocks, seen.prompt_paragraphs = facts['pre'], facts['prompts']
    seen.empty_entries, seen.ids = facts['empty'], set(facts['ids'])
    seen.links = facts['links']
    return seen


def html_pages(site: Path = SITE) -> list[str]:
    skip = {'_static', '_sources', '_images', '_downloads'}
    return sorted(
        p.relative_to(site).as_posix()
        for p in site.rglob('*.html')
        if p.relative_to(site).parts[0] not in skip
    )


@pytest.fixture(scope='module')
def site(server, browser) -> dict[str, Page]:
    pages = {path: _visit(browser, server, path) for path in html_pages()}
    assert len(pages) > 20, sorted(pages)
    return pages


def _report(problems: dict[str, list[str]]) -> str:
    return '\n'.join(
        f'{page}:\n    '
        + '\n    '.join(items[:8])
        + (f'\n    ... {len(items) - 8} more' if len(items) > 8 else '')
        for page, items in sorted(problems.items())
    )


def source_page(html: str, docs: Path = DOCS) -> Path | None:
    """The Markdown page an HTML page was built from (Sphinx or MkDocs layout)."""
    stem = html.removesuffix('.html')
    for candidate in (stem, stem.removesuffix('/index') if stem.endswith('/index') else None):
        if candidate and (docs / f'{candidate}.md').is_file():
            return docs / f'{candidate}.md'
    if stem == 'index':
        return docs / 'index.md'
    return None


# ------------------------------------------------------------------------ checks


def test_no_console_errors_failed_requests_or_network(site):
    problems = {p.path: p.errors for p in site.values() if p.errors}
    assert not problems, 'pages with errors:\n' + _report(problems)


def test_no_raw_markup_in_rendered_text(site):
    problems = {}
    for page in site.values():
        found = []
        for pattern, what in ((_FENCE, 'Markdown fence'), (_DIRECTIVE, 'reST directive')):
            found += [f'{what}: {m.group(0).strip()!r}' for m in pattern.finditer(page.text)]
        found += [f'reST role: {m.group(0)!r}' for m in _ROLE.finditer(page.text)]
        if found:
            problems[page.path] = found
    assert not problems, 'unrendered markup:\n' + _report(problems)


def test_code_blocks_render_as_code(site):
    pages = _load_pages()
    problems = {}
    for page in site.values():
        found = [
            f'a >>> example rendered as a paragraph: {t[:60]!r}' for t in page.prompt_paragraphs
        ]
        source = source_page(page.path)
        if source is not None:
            # MyST directives ({toctree}, {include}) are fenced too, but are no code.
            blocks = [
                b
                for b in pages.code_blocks(source.read_text(encoding='utf-8'))
                if not (b.info and b.info[0].startswith('{'))
            ]
            if page.pre_blocks < len(blocks):
                found.append(
                    f'{source.name} has {len(blocks)} fenced blocks, the page shows '
                    f'{page.pre_blocks} code blocks'
                )
        if found:
            problems[page.path] = found
    assert not problems, 'code that does not render as code:\n' + _report(problems)


_PRIVATE_JAX = re.compile(r'\b(?:jax\._src|jaxlib\._\w*)\.\w')


def test_no_private_jax_paths(site):
    """A path below ``jax._src`` (a placeholder, an annotation) names no documented object.

    The changelogs (project/) may name one: they record the private imports removed.
    """
    problems = {
        p.path: [
            line.strip()[:120] for line in p.all_text.splitlines() if _PRIVATE_JAX.search(line)
        ]
        for p in site.values()
        if _PRIVATE_JAX.search(p.all_text) and not p.path.startswith('project/')
    }
    assert not problems, 'pages naming jax._src:\n' + _report(problems)


def test_api_entries_are_not_empty(site):
    problems = {
        p.path: [f'empty entry #{e}' for e in p.empty_entries]
        for p in site.values()
        if p.empty_entries
    }
    assert not problems, 'API entries without text:\n' + _report(problems)


def test_links_and_anchors_resolve(site, server):
    problems: dict[str, list[str]] = {}
    for page in site.values():
        for link in page.links:
            url, anchor = urldefrag(link)
            if not url.startswith(server):
                continue  # another site: not fetched (the build machine is offline)
            target = unquote(urlsplit(url).path).lstrip('/') or 'index.html'
            if target.endswith('/'):
                target += 'index.html'
            if target not in site:
                if not (SITE / target).is_file():
                    problems.setdefault(page.path, []).append(f'missing page: {target}')
                continue
            if anchor and unquote(anchor) not in site[target].ids:
                problems.setdefault(page.path, []).append(f'missing anchor: {target}#{anchor}')
    assert not problems, 'broken links:\n' + _report(problems)


@pytest.mark.parametrize('name', SEARCH_NAMES)
def test_search_finds_the_entry_first(browser, server, name):
    page = browser.new_page()
    try:
        page.goto(f'{server}search.html?q={name}', wait_until='load')
        first = page.wait_for_selector('#search-results li a', timeout=30_000)
        href = first.get_attribute('href') or ''
    finally:
        page.close()
    target = urlsplit(href).path.rsplit('/', 1)[-1]
    assert target == f'{name}.html', f'search for {name!r}: first result is {href!r}'
