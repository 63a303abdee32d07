"""The documentation site: ``python3 -m nox -s docs`` builds it into site/.

Sphinx with the Furo theme, MyST for the Markdown pages, autodoc and napoleon
for the Google-style docstrings. Warnings are errors (``sphinx-build -W``), and the
site needs no network: no web fonts, no CDN scripts; math is MathML, drawn by the
browser. ``docs/_site_hooks.py`` writes the API pages and each page's pictures
before Sphinx reads the sources, and puts the navigation below on the home page.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))

project = 'linen'
html_title = 'linen'
author = 'the linen developers'
copyright = 'the linen developers'

extensions = [
    'myst_parser',
    'sphinx.ext.autodoc',
    'sphinx.ext.napoleon',
    '_site_hooks',
]

root_doc = 'index'
source_suffix = {'.md': 'markdown', '.rst': 'restructuredtext'}
exclude_patterns = ['_build', '**/__pycache__', '**/.pytest_cache']

# The navigation, in order: (caption, pages). A page under docs/ that is in no
# section fails the build (Sphinx: "document isn't included in any toctree").
# Entries ending in '*' are globs, so new guides appear without editing this list.
linen_nav = [
    ('Start', ['getting-started', 'installing', 'migrating']),
    (
        'Guides',
        [
            'modules',
            'guides/setup-vs-compact',
            'guides/state',
            'guides/dropout-batchnorm',
            'guides/intermediates',
            'guides/lr-schedules',
            'guides/transfer-learning',
            'guides/rnn',
            'guides/sharp-bits',
            'profiling',
            'scaling',
            'plugins',
            'guides/examples',
            'guides/glossary',
            'guides/*',
        ],
    ),
    ('Background', ['differences', 'design']),
    ('API reference', ['api/index']),
    # The benchmark pages mirror benchmarks/*.md (which link each other by file name).
    ('Benchmarks', ['project/benchmarks', 'project/benchmarks/README', 'project/benchmarks/*']),
    ('Project', ['project/*']),
]

# --- Markdown
myst_enable_extensions = ['colon_fence', 'deflist']
# Links to headings of other pages (`page.md#a-heading`) resolve, and are checked.
myst_heading_anchors = 4

# --- docstrings
autodoc_default_options = {'member-order': 'bysource'}
autodoc_typehints = 'signature'
# A signature that would run off the page puts one parameter per line.
python_maximum_signature_line_length = 88
python_display_short_literal_types = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# Attributes as a field list: a dataclass field is also a member autodoc documents,
# and two descriptions of one attribute would clash.
napoleon_use_ivar = True
napoleon_attr_annotations = True

# --- HTML
html_theme = 'furo'
html_static_path = ['_static']
html_css_files = ['linen.css']
html_math_renderer = 'mathml'
html_show_sourcelink = False
html_copy_source = False
pygments_style = 'friendly'
pygments_dark_style = 'monokai'
html_favicon = '_static/favicon.svg'
