"""Differential fuzzing of linen against Flax (see README.md in this folder).

Importing the package sets the suite's JAX conditions (the root conftest's: rank
promotion ``raise``, four host devices, XLA's fast compile level) when JAX is not
imported yet, so a command-line run compares under the same settings as CI.
"""

from __future__ import annotations

import os
import sys

if 'jax' not in sys.modules:
    os.environ.setdefault('JAX_NUMPY_RANK_PROMOTION', 'raise')
    os.environ['JAX_PLATFORMS'] = os.environ.get('JAX_PLATFORMS') or 'cpu'
    _flags = os.environ.get('XLA_FLAGS', '')
    if '--xla_force_host_platform_device_count' not in _flags:
        _flags += ' --xla_force_host_platform_device_count=4'
    if '--xla_backend_optimization_level' not in _flags:
        _flags += ' --xla_backend_optimization_level=0'
    os.environ['XLA_FLAGS'] = _flags.strip()
