"""Executes the user guide: every ```python block of every ``docs/*.md`` file.

The blocks of one file run in order in one namespace, as a reader would type
them into one session. A block whose info string is ``python no-run`` is shown
but not run (code that needs a GPU, a network, or a package the page is about
installing). Other languages (``toml``, ``bash``, ``text``) are never run.
"""

from __future__ import annotations

import re
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path

import jax
import pytest

DOCS = Path(__file__).resolve().parent
PAGES = sorted(DOCS.glob('*.md'))
ALLOW_RANK_PROMOTION = '<!-- docs: allow-rank-promotion -->'

# An opening fence (``` or longer, maybe indented inside a list item) with its info
# string, then everything up to a closing fence of the same indentation.
_FENCE = re.compile(
    r'^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^`\n]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$',
    re.MULTILINE | re.DOTALL,
)
_RUNNABLE = {'python', 'py', 'python3'}


@dataclass(frozen=True)
class CodeBlock:
    """A fenced block of a markdown page; ``line`` is where its code starts (1-based)."""

    info: tuple[str, ...]
    line: int
    code: str

    @property
    def runs(self) -> bool:
        return bool(self.info) and self.info[0] in _RUNNABLE and 'no-run' not in self.info[1:]


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block of ``text``, in order."""
    blocks = []
    for match in _FENCE.finditer(text):
        line = text.count('\n', 0, match.start('body')) + 1
        body = textwrap.dedent(match.group('body'))
        blocks.append(CodeBlock(tuple(match.group('info').split()), line, body))
    return blocks


def run_page(path: Path, text: str | None = None) -> dict:
    """Run the runnable blocks of one page in one fresh namespace; return the namespace.

    Code is compiled under the page's file name with its own line numbers, so a
    traceback points at the line of the markdown file.
    """
    text = path.read_text(encoding='utf-8') if text is None else text
    # A real module in sys.modules: dataclasses (and so Modules) defined on a page
    # look up their defining module by name.
    module = types.ModuleType(f'_linen_docs_{path.stem.replace("-", "_")}')
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    # A page that reproduces code relying on implicit rank promotion (the seed's
    # SimpleDense adds a (features,) bias to a (batch, features) output, which Flax
    # rejects under strict promotion too) says so with this marker; every other page
    # runs under the suite's jax_numpy_rank_promotion='raise'.
    promotion = 'allow' if ALLOW_RANK_PROMOTION in text else jax.config.jax_numpy_rank_promotion
    try:
        with jax.numpy_rank_promotion(promotion):
            _run_blocks(path, text, module)
    finally:
        sys.modules.pop(module.__name__, None)
    return module.__dict__


def _run_blocks(path: Path, text: str, module: types.ModuleType) -> None:
    for block in code_blocks(text):
        if not block.runs:
            continue
        code = compile('\n' * (block.line - 1) + block.code, str(path), 'exec')
        try:
            exec(code, module.__dict__)
        except Exception as exc:
            raise AssertionError(
                f'{path.name}: the python block at line {block.line} raised '
                f'{type(exc).__name__}: {exc}'
            ) from exc


@pytest.mark.parametrize('page', PAGES, ids=[p.name for p in PAGES])
def test_page_runs(page: Path, doc_sandbox) -> None:
    run_page(page)


def test_every_page_has_code() -> None:
    """A guide page without a single runnable block is probably mis-fenced."""
    assert PAGES, 'docs/ has no markdown pages'
    for page in PAGES:
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
