"""The committed API reference pages match the public surfaces (``docs/gen_api.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent


def _gen_api():
    spec = importlib.util.spec_from_file_location('_linen_gen_api', DOCS / 'gen_api.py')
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_api_pages_are_current():
    stale = [
        page
        for page, text in _gen_api().pages().items()
        if (DOCS / 'api' / page).read_text(encoding='utf-8') != text
    ]
    assert not stale, f'run `python docs/gen_api.py` to refresh docs/api/{stale}'


def test_every_public_name_has_an_entry():
    gen = _gen_api()
    text = '\n'.join(gen.pages().values())
    for _, _, modules, _ in gen.PAGES:
        for module_name in modules:
            module = importlib.import_module(module_name)
            for name in module.__all__:
                if not name.startswith('__'):
                    assert f'### `{module_name}.{name}`' in text, f'{module_name}.{name}'
