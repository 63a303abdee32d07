"""What ``import linen.nn`` loads: nothing a user does not need at import.

Import time itself is measured by the benchmark (``benchmarks/``), never here: a
timed test fails on a loaded machine. What is checked is the cause of a slow import,
a heavy module pulled in eagerly, in a fresh interpreter.
"""

from __future__ import annotations

# Modules only some features need: plotting (flame graphs), checkpoints, Pallas and
# the jaxpr internals lazy_init prunes with, and the libraries tests compare with.
HEAVY = (
    'matplotlib',
    'msgpack',
    'jax.extend',
    'jax.experimental.pallas',
    'optax',
    'flax',
    'haiku',
    'equinox',
    'rich',
    'pandas',
)


def test_import_linen_nn_loads_no_heavy_module(probe, needs_facade):
    result = probe(
        f"""
        import json, sys
        import linen.core
        import linen.nn as nn
        dense = nn.Dense  # resolves the facade: every plugin is discovered by now
        nn.Dense(3)
        pm = linen.core.get_plugin_manager()
        print(json.dumps({{
            'dense': dense.__module__,
            'plugins': sorted(name for name, _ in pm.list_name_plugin()),
            'heavy': sorted(m for m in {HEAVY!r} if m in sys.modules),
        }}))
        """
    )
    assert result['heavy'] == []
    assert result['dense'] == 'linen.layers._linear'
    # Lazy imports must not cost a plugin: the first-party ones are all registered.
    assert {'core', 'layers', 'module', 'profiling', 'transforms'} <= set(result['plugins'])
