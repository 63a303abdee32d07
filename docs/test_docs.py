"""Executes the user guide: every ```python block of every page (``docs/*.md``, ``docs/guides/``).

The blocks of one file run in order in one namespace, as a reader would type
them into one session. A block whose info string is ``python no-run`` is shown
but not run (code that needs a GPU, a network, or a package the page is about
installing). Other languages (``toml``, ``bash``, ``text``) are never run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent


def _load_pages():
    # docs/ is no package: the runner shared with the site build is loaded by path.
    name = '_linen_docs_pages'
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DOCS / '_pages.py')
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve their module by name
        spec.loader.exec_module(module)
    return sys.modules[name]


_pages = _load_pages()
CodeBlock = _pages.CodeBlock
GeneratedFileError = _pages.GeneratedFileError
code_blocks = _pages.code_blocks
run_page = _pages.run_page
generated_links = _pages.generated_links
collect_generated = _pages.collect_generated
build_generated = _pages.build_generated
# Every guide page, wherever under docs/ it lies (a new page is picked up by itself).
PAGES = _pages.guide_pages(DOCS)


@pytest.mark.parametrize('page', PAGES, ids=[p.relative_to(DOCS).as_posix() for p in PAGES])
def test_page_runs(page: Path, doc_sandbox) -> None:
    run_page(page)
    # The pictures the page shows are the files its code just wrote (the site build
    # publishes them the same way, docs/_site_hooks.py).
    for uri, content in collect_generated(page, doc_sandbox).items():
        if uri.endswith('.png'):
            assert content.startswith(b'\x89PNG\r\n\x1a\n'), uri


def test_pages_in_subfolders_are_run(tmp_path) -> None:
    (tmp_path / 'guides').mkdir()
    for page in ('index.md', 'guides/rnn.md', 'api/index.md', 'project/log.md'):
        (tmp_path / page).parent.mkdir(exist_ok=True)
        (tmp_path / page).write_text('# x\n', encoding='utf-8')
    found = [p.relative_to(tmp_path).as_posix() for p in _pages.guide_pages(tmp_path)]
    assert found == ['guides/rnn.md', 'index.md']
    assert 'index.md' in [p.name for p in PAGES]


# Pages that are prose by nature: the design document describes the code, runs none.
PROSE_PAGES = {'design.md'}


def test_every_page_has_code() -> None:
    """A guide page without a single runnable block is probably mis-fenced."""
    assert PAGES, 'docs/ has no markdown pages'
    for page in PAGES:
        if page.relative_to(DOCS).as_posix() in PROSE_PAGES:
            continue
        assert any(b.runs for b in code_blocks(page.read_text(encoding='utf-8'))), page.name


# ------------------------------------------------------------- the runner itself

_SAMPLE = """\
# Title

```python
x = 1
```

```python no-run
raise RuntimeError('never run')
```

```toml
[project]
```

- a list item:

  ```python
  y = x + 1
  ```
"""


def test_code_blocks_parses_info_lines_and_indentation() -> None:
    blocks = code_blocks(_SAMPLE)
    assert [b.info for b in blocks] == [('python',), ('python', 'no-run'), ('toml',), ('python',)]
    assert [b.runs for b in blocks] == [True, False, False, True]
    assert [b.line for b in blocks] == [4, 8, 12, 18]
    assert blocks[3].code == 'y = x + 1\n'


def test_run_page_shares_one_namespace_and_skips_no_run(tmp_path) -> None:
    namespace = run_page(tmp_path / 'sample.md', _SAMPLE)
    assert (namespace['x'], namespace['y']) == (1, 2)


def test_run_page_supports_dataclasses(tmp_path) -> None:
    """Dataclasses resolve their module through sys.modules; a bare dict namespace fails that."""
    page = (
        '```python\nimport dataclasses\n\n@dataclasses.dataclass\n'
        'class Point:\n    x: int\n\nassert Point(3).x == 3\n```\n'
    )
    namespace = run_page(tmp_path / 'page.md', page)
    assert namespace['Point'](1) == namespace['Point'](1)


def test_run_page_reports_the_markdown_line(tmp_path) -> None:
    page = tmp_path / 'bad.md'
    page.write_text('text\n\n```python\nok = 1\nundefined_name\n```\n', encoding='utf-8')
    with pytest.raises(
        AssertionError, match=r'bad\.md: the python block at line 4 raised NameError'
    ):
        run_page(page)
    try:
        run_page(page)
    except AssertionError as exc:
        frames = [f for f in _traceback_frames(exc.__cause__) if f[0] == str(page)]
        assert frames == [(str(page), 5)]


def _traceback_frames(exc: BaseException) -> list[tuple[str, int]]:
    tb, frames = exc.__traceback__, []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return frames
