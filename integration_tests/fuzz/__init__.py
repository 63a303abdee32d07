"""Differential fuzzing of linen against Flax (see README.md in this folder).

Importing the package sets the suite's JAX conditions (the root conftest's: rank
promotion ``raise``, four host devices, XLA's fast compile level) when JAX is not
imported yet, so a command-line run compares under the same settings as CI.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if 'jax' not in sys.modules:
    # The root conftest only sets those environment variables: one source for both.
    runpy.run_path(str(Path(__file__).resolve().parents[2] / 'conftest.py'))
