"""Isolation for the executable docs: a page may register plugins, change config
flags or write files, and none of it may leak into the next page or other tests."""

from __future__ import annotations

import os

import pytest

# The checks of the built site need the site and Chromium: `nox -s docs` builds the
# one, installs the other and names the site in LINEN_DOCS_SITE. Elsewhere (the test
# sessions) they are not collected at all, rather than skipped one by one.
collect_ignore = [] if os.environ.get('LINEN_DOCS_SITE') else ['test_browser.py']


@pytest.fixture
def doc_sandbox(tmp_path, monkeypatch):
    """Run a page in an empty working directory; undo its plugin and config changes."""
    from linen.core import _bus
    from linen.core.config import config

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv('LINEN_DISABLE_PLUGINS', raising=False)
    pm = _bus.get_plugin_manager()
    # by name: pluggy's get_plugins() builds a set, and test plugins need not hash
    names_before = {name for name, _ in pm.list_name_plugin()}
    flags_before = {name: getattr(config, name) for name in config.flags()}
    yield tmp_path
    for name, _ in pm.list_name_plugin():
        if name not in names_before:
            _bus.unregister(name)
    for name, value in flags_before.items():
        if getattr(config, name) != value:
            config.update(name, value)
