"""A persistent-cache hit compiled under other labels is reported, never attributed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import warnings

    import jax
    import jax.numpy as jnp

    import linen.nn as nn
    from linen.profiling import module_costs
    from linen.profiling.errors import StaleCompiledLabelsWarning

    class First(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(4)(x)

    class Second(First):  # the same program under other labels
        pass

    x = jnp.ones((2, 3))
    for model in (First(), Second()):
        variables = model.init(jax.random.key(0), x)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            costs = module_costs(model.apply, variables, x)
        stale = [w for w in caught if issubclass(w.category, StaleCompiledLabelsWarning)]
        print(type(model).__name__, len(stale), sorted(r.path for r in costs.rows))
    """
)


def test_a_cache_hit_under_other_labels_warns(tmp_path):
    env = dict(
        os.environ,
        JAX_COMPILATION_CACHE_DIR=str(tmp_path / 'cache'),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS='0',
    )
    out = subprocess.run(
        [sys.executable, '-c', SCRIPT], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    first, second = out.stdout.strip().splitlines()[-2:]
    # The first compile is the cache's own: no warning, its own labels.
    assert first.startswith('First 0 ') and 'First/Dense_0' in first
    # The second is served from the cache with First's op names: it says so.
    assert second.startswith('Second 1 '), second
