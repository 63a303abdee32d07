"""Running the guide pages' code, for the tests and for the site build.

The ```python blocks of one page run in order in one namespace, as a reader would
type them into one session. A block whose info string is ``python no-run`` is shown
but not run (code that needs a GPU, a network, or a package the page is about
installing). Other languages (``toml``, ``bash``, ``text``) are never run.

A page shows a picture its own code makes by linking it under
``assets/generated/<page>/``: ``![Loss](assets/generated/getting-started/loss.png)``
on ``getting-started.md`` is the file ``loss.png`` that the page's code writes
into its working directory. ``docs/test_docs.py`` runs every page and checks that
each such file was written; the site build (``docs/_site_hooks.py``) runs the
pages that link one and publishes what they wrote. Nothing is written into
``docs/`` and nothing generated is committed.

This module needs only JAX (no pytest, no mkdocs): both sides import it by path.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path

ALLOW_RANK_PROMOTION = '<!-- docs: allow-rank-promotion -->'
GENERATED = 'assets/generated'

# An opening fence (``` or longer, maybe indented inside a list item) with its info
# string, then everything up to a closing fence of the same indentation.
_FENCE = re.compile(
    r'^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^`\n]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$',
    re.MULTILINE | re.DOTALL,
)
_RUNNABLE = {'python', 'py', 'python3'}
# Folders of docs/ that hold no guide pages: the generated API reference, the
# included changelogs, the pictures and the theme's files.
NOT_GUIDES = {'api', 'project', 'assets', '_static', '_build'}
# A Markdown link or image whose target is under assets/generated/ (a title may follow).
_GENERATED_LINK = re.compile(r'\]\(\s*' + re.escape(GENERATED) + r'/(?P<target>[^)\s]+)')


@dataclass(frozen=True)
class CodeBlock:
    """A fenced block of a markdown page; ``line`` is where its code starts (1-based)."""

    info: tuple[str, ...]
    line: int
    code: str

    @property
    def runs(self) -> bool:
        return bool(self.info) and self.info[0] in _RUNNABLE and 'no-run' not in self.info[1:]


class GeneratedFileError(RuntimeError):
    """A page links a generated file that its code did not write (or wrote empty)."""


def guide_pages(docs: Path) -> list[Path]:
    """Every Markdown page a reader follows: ``docs/*.md`` and subfolders (``guides/``)."""
    return sorted(
        page
        for page in docs.rglob('*.md')
        if page.relative_to(docs).parts[0] not in NOT_GUIDES
        and not any(part.startswith(('.', '_')) for part in page.relative_to(docs).parts)
    )


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
    import jax

    text = path.read_text(encoding='utf-8') if text is None else text
    # A real module in sys.modules: dataclasses (and so Modules) defined on a page
    # look up their defining module by name.
    module = types.ModuleType(f'_linen_docs_{path.stem.replace("-", "_")}')
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    # A page that reproduces code relying on implicit rank promotion (the SimpleDense
    # of Flax's Linen introduction adds a (features,) bias to a (batch, features) output, which Flax
    # rejects under strict promotion too) says so with this marker; every other page
    # runs under the caller's setting (the suite's jax_numpy_rank_promotion='raise').
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


def generated_links(path: Path, text: str | None = None) -> list[str]:
    """The files a page links under ``assets/generated/<page>/``, as names in that folder.

    Raises:
      GeneratedFileError: a link points into another page's folder or a subfolder
        (a page publishes only what its own code writes, by file name).
    """
    text = path.read_text(encoding='utf-8') if text is None else text
    names: dict[str, None] = {}
    for match in _GENERATED_LINK.finditer(text):
        page, _, name = match.group('target').partition('/')
        if page != path.stem or not name or '/' in name:
            raise GeneratedFileError(
                f'{path.name} links {GENERATED}/{match.group("target")}; a page links only '
                f'the files its code writes, as {GENERATED}/{path.stem}/<file name>.'
            )
        names[name] = None
    return list(names)


def collect_generated(path: Path, workdir: Path, text: str | None = None) -> dict[str, bytes]:
    """What the page's code wrote for its generated links: ``{site path: content}``.

    Raises:
      GeneratedFileError: a linked file is missing from ``workdir`` or empty.
    """
    files = {}
    for name in generated_links(path, text):
        written = workdir / name
        content = written.read_bytes() if written.is_file() else b''
        if not content:
            raise GeneratedFileError(
                f'{path.name} links {GENERATED}/{path.stem}/{name}, but its code wrote '
                f'{"an empty" if written.is_file() else "no"} file {name!r} into its working '
                "directory: save the picture under that name in one of the page's blocks."
            )
        files[f'{GENERATED}/{path.stem}/{name}'] = content
    return files


@contextlib.contextmanager
def _working_directory(path: Path):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def build_generated(path: Path) -> dict[str, bytes]:
    """Run a page in a fresh temporary directory and return its generated files.

    A page without generated links is not run (``{}``).
    """
    text = path.read_text(encoding='utf-8')
    if not generated_links(path, text):
        return {}
    with tempfile.TemporaryDirectory(prefix=f'linen-docs-{path.stem}-') as workdir:
        with _working_directory(Path(workdir)):
            run_page(path, text)
        return collect_generated(path, Path(workdir), text)
