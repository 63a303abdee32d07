"""A page's pictures come from its own code at build time (docs/_pages.py, docs/_site_hooks.py).

The real pages' pictures are checked where the pages run (test_docs.py: each
linked file is written by the page's code); here the mechanism runs on small
pages, through to a real strict ``mkdocs build`` of a tiny site.
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


def test_strict_mkdocs_build_publishes_the_generated_files(tmp_path):
    # mkdocs (not the Material theme) is a test dependency (TEST_DEPS in noxfile.py).
    from mkdocs.commands import build
    from mkdocs.config import load_config

    docs = tmp_path / 'docs'
    _page(docs, 'curves.md', PAGE)
    _page(docs, 'index.md', '# Home\n\nSee [the curves](curves.md).\n')
    config_file = tmp_path / 'mkdocs.yml'
    config_file.write_text(
        textwrap.dedent(f"""\
            site_name: t
            docs_dir: docs
            site_dir: site
            strict: true
            theme: mkdocs
            hooks: [{DOCS / '_site_hooks.py'}]
            """),
        encoding='utf-8',
    )
    config = load_config(config_file=str(config_file))
    build.build(config)  # strict: a link to a file the site lacks would fail here
    site = tmp_path / 'site'
    assert (site / 'assets/generated/curves/curve.png').read_bytes() == PNG + b'curve'
    assert (site / 'assets/generated/curves/data.json').is_file()
    html = (site / 'curves' / 'index.html').read_text(encoding='utf-8')
    assert 'src="../assets/generated/curves/curve.png"' in html
    assert not (docs / 'assets').exists()  # nothing generated lands in the sources
