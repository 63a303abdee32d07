"""MkDocs hooks (``hooks:`` in mkdocs.yml): each page's pictures, made by its own code.

A page that links files under ``assets/generated/<page>/`` (see ``docs/_pages.py``)
is run during ``mkdocs build``, in a temporary directory, and the files its code
wrote are added to the site as generated files: the training curves of
getting-started.md and the flame graph of profiling.md are drawn from the code
shown next to them, at build time, never committed. A linked file the code did
not write fails the build with the page and the file name.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

_log = logging.getLogger('mkdocs.hooks.generated')


def _pages_module():
    # mkdocs loads this file by path; its sibling is loaded the same way.
    name = '_linen_docs_pages'
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name('_pages.py'))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve their module by name
        spec.loader.exec_module(module)
    return sys.modules[name]


def on_files(files: Files, config) -> Files:
    pages = _pages_module()
    for page in sorted(Path(config['docs_dir']).glob('*.md')):
        # What the page prints (its tables) belongs on the page, not in the build log.
        with contextlib.redirect_stdout(io.StringIO()):
            generated = pages.build_generated(page)
        for uri, content in generated.items():
            files.append(File.generated(config, uri, content=content))
        if generated:
            _log.info('%s: generated %s', page.name, ', '.join(sorted(generated)))
    return files
