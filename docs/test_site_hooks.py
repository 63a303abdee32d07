"""A page's pictures come from its own code at build time (docs/_pages.py, docs/_site_hooks.py).

The real pages' pictures are checked where the pages run (test_docs.py: each
linked file is written by the page's code); here the mechanism runs on small
pages, through to a real strict Sphinx build of a tiny site.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent


def _load(name: str, file: str):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DOCS / file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


pages = _load('_linen_docs_pages', '_pages.py')

PNG = b'\x89PNG\r\n\x1a\n'
PAGE = """\
# Curves

```python
import os

with open('curve.png', 'wb') as handle:
    handle.write(PNG + b'curve')
with open('data.json', 'w') as handle:
    handle.write(os.path.basename(os.getcwd()))
```

![The curve](assets/generated/curves/curve.png) and [its data](assets/generated/curves/data.json).
"""


def _page(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text.replace('PNG +', repr(PNG) + ' +'), encoding='utf-8')
    return path


def test_build_generated_runs_the_page_in_a_fresh_directory(tmp_path):
    page = _page(tmp_path / 'docs', 'curves.md', PAGE)
    before = os.getcwd()
    files = pages.build_generated(page)
    assert os.getcwd() == before
    assert set(files) == {'assets/generated/curves/curve.png', 'assets/generated/curves/data.json'}
    assert files['assets/generated/curves/curve.png'] == PNG + b'curve'
    # It ran in a temporary directory of its own, and wrote nothing beside the page.
    assert files['assets/generated/curves/data.json'].startswith(b'linen-docs-curves-')
    assert sorted(p.name for p in page.parent.iterdir()) == ['curves.md']


def test_a_page_without_generated_links_is_not_run(tmp_path):
    page = _page(tmp_path, 'plain.md', '# Plain\n\n```python\nraise SystemExit(3)\n```\n')
    assert pages.build_generated(page) == {}


def test_a_linked_file_the_code_did_not_write_is_an_error(tmp_path):
    page = _page(tmp_path, 'curves.md', PAGE.replace('curve.png)', 'missing.png)'))
    with pytest.raises(
        pages.GeneratedFileError, match=r'curves\.md links .*missing\.png.* no file'
    ):
        pages.build_generated(page)


def test_links_into_another_pages_folder_are_refused(tmp_path):
    page = _page(tmp_path, 'other.md', '![x](assets/generated/curves/curve.png)\n')
    with pytest.raises(pages.GeneratedFileError, match=r'assets/generated/other/<file name>'):
        pages.generated_links(page)


# MyST still reaches for Sphinx attributes Sphinx has deprecated: theirs to update.
@pytest.mark.filterwarnings('ignore:.*Check CHANGES for Sphinx API modifications')
def test_strict_sphinx_build_publishes_the_generated_files(tmp_path):
    # Sphinx and MyST (not the site's theme) are test dependencies (TEST_DEPS in noxfile.py).
    from sphinx.application import Sphinx

    docs = tmp_path / 'docs'
    _page(docs, 'curves.md', PAGE)
    _page(docs / 'guides', 'nested.md', PAGE.replace('curves/', 'nested/'))
    _page(docs, 'index.md', '# Home\n\nSee [the curves](curves.md).\n')
    (docs / 'conf.py').write_text(
        textwrap.dedent(f"""\
            import sys
            sys.path.insert(0, {str(DOCS)!r})
            extensions = ['myst_parser', '_site_hooks']
            linen_nav = [('Pages', ['curves', 'guides/*'])]
            """),
        encoding='utf-8',
    )
    out = tmp_path / 'site'
    app = Sphinx(docs, docs, out, tmp_path / 'doctrees', 'html', warningiserror=True, status=None)
    app.build()  # warnings are errors: an image the site lacks would fail here
    assert (out / '_images/curve.png').read_bytes() == PNG + b'curve'
    html = (out / 'curves.html').read_text(encoding='utf-8')
    assert 'src="_images/curve.png"' in html
    assert 'guides/nested.html' in (out / 'index.html').read_text(encoding='utf-8')  # the nav
    # The generated files lie beside their page, in a folder git ignores.
    generated = docs / 'assets' / 'generated'
    assert (generated / '.gitignore').read_text().splitlines()[-1] == '*'
    assert (docs / 'guides' / 'assets' / 'generated' / 'nested' / 'curve.png').is_file()


def test_navigation_globs_only_pages_no_entry_names(tmp_path):
    hooks = _load('_linen_docs_site_hooks', '_site_hooks.py')
    for name in ('guides/a.md', 'guides/b.md', 'intro.md'):
        _page(tmp_path / Path(name).parent, Path(name).name, '# x\n')
    nav = [('Guides', ['intro', 'guides/b', 'missing', 'guides/*'])]
    text = hooks.navigation(tmp_path, nav)
    assert ':glob:' in text and 'guides/*' in text and 'missing' not in text
    (tmp_path / 'guides' / 'a.md').unlink()
    # Every page the glob matches is named: a glob that adds nothing would be a warning.
    assert 'guides/*' not in hooks.navigation(tmp_path, nav)
