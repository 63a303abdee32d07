"""The API reference (``docs/gen_api.py``): an entry for every name users import.

The rendered pages are checked in a browser by test_browser.py (``nox -s docs``);
these checks need no build and run with the suite.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
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


gen = _load('_linen_docs_gen_api', 'gen_api.py')


@pytest.fixture(scope='module')
def pages() -> dict[str, str]:
    return gen.pages()


@pytest.fixture(scope='module')
def entries():
    return {e.fullname: e for e in gen.entries()}


def test_every_name_users_import_has_a_page(pages):
    import linen.nn as nn

    # The first-party names of dir(nn): the third-party fixture plugin installed in the
    # test environment exports to nn too, and is not part of this reference.
    expected = [f'linen.nn.{n}' for n in dir(nn) if not nn_is_third_party(n)]
    for namespace in ('linen.core', 'linen.training', 'linen.profiling'):
        module = importlib.import_module(namespace)
        expected += [f'{namespace}.{n}' for n in module.__all__ if not n.startswith('_')]
    titles = {text.split('\n')[3] for path, text in pages.items() if '/' in path}
    missing = [name for name in expected if name not in titles]
    assert not missing, missing
    assert len(expected) > 200
    for module_page in ('nn/module-module', 'nn/summary', 'nn/transforms'):
        assert f'{module_page}.rst' in pages, module_page


def nn_is_third_party(name: str) -> bool:
    import linen.nn as nn

    return getattr(getattr(nn, name), '__module__', '').startswith('linen_plugin_example')


@pytest.mark.parametrize(
    ('name', 'distribution', 'kind'),
    [
        ('linen.nn.Dense', 'linen-layers', 'class'),
        ('linen.nn.Module', 'linen-module', 'class'),
        ('linen.nn.remat', 'linen-transforms', 'function'),
        ('linen.nn.tabulate', 'linen-profiling', 'function'),
        ('linen.nn.FrozenDict', 'linen-core', 'class'),
        ('linen.nn.relu', 'linen-layers', 'jax'),
        ('linen.nn.summary', 'linen-profiling', 'module'),
        ('linen.training.TrainState', 'linen-core', 'class'),
        ('linen.profiling.DEVICE_PEAKS', 'linen-profiling', 'data'),
    ],
)
def test_entries_say_who_provides_them(entries, pages, name, distribution, kind):
    entry = entries[name]
    assert (entry.distribution, entry.kind) == (distribution, kind)
    assert f'**{distribution}**' in pages[f'{entry.page}.rst']


def test_every_entry_has_documentation(entries):
    """An entry is never empty: a docstring, a comment at the constant, or JAX's link."""
    empty = [
        name
        for name, entry in entries.items()
        if entry.kind != 'jax' and not gen.docstring(entry.obj, entry.name).strip()
    ]
    assert not empty, f'no docstring (fix it in the source): {empty}'


def test_jax_reexports_link_to_jax_docs(pages):
    relu = pages['nn/relu.rst']
    assert 'https://docs.jax.dev/en/latest/_autosummary/jax.nn.relu.html' in relu
    assert '.. py:function:: relu(x' in relu
    assert '_autosummary/jax.nn.initializers.ones.html' in pages['nn/ones.rst']
    assert not [path for path, text in pages.items() if 'jax._src' in text]


def test_private_jax_paths_become_public():
    text = 'mesh (jax._src.mesh.Mesh | None), x: jaxlib._jax.Array, y: jax._src.typing.ArrayLike'
    assert gen.public_jax_text(text) == (
        'mesh (jax.sharding.Mesh | None), x: jax.Array, y: jax.typing.ArrayLike'
    )


def test_constants_are_documented_by_their_comment():
    import linen.profiling as profiling

    doc = gen.docstring(profiling.DEVICE_PEAKS, 'DEVICE_PEAKS')
    assert 'peak FLOP/s' in doc


def test_page_files_do_not_clash_on_a_case_insensitive_disk(pages):
    lowered = [p.lower() for p in pages]
    assert len(set(lowered)) == len(lowered)
    # nn.Module and the submodule nn.module both have pages.
    assert {'nn/Module.rst', 'nn/module-module.rst'} <= set(pages)


def test_summaries_are_valid_rest():
    # A trailing underscore is a reST link target, `*` starts emphasis.
    cell = gen._summary(type('X', (), {'__doc__': 'Own and ``inclusive_*`` bytes; a_ b* c|d.'}))
    assert cell == r'Own and ``inclusive_*`` bytes; a\_ b\* c\|d.'
    assert not re.search(r'(?<!\\)[*|]', cell.replace('``inclusive_*``', ''))
