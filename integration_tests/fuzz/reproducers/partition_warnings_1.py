"""Hand-written reproducer (FINDINGS F2): ``nn.logical_to_mesh`` of a spec holding a
name no rule maps (here the mesh axis name of an ``nn.with_partitioning`` kernel).

Flax returns ``P(None, None)`` silently; linen returns the same spec but warns
``LogicalAxisRulesWarning``, which fails code run with warnings as errors (Flax's
own test conditions). `python` this file exits 1 while the difference remains.
"""

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'partition/warnings/layer.Dense+partition.mesh'


def outcome(nn) -> tuple[str, list[str]]:
    import jax
    import jax.numpy as jnp

    init = nn.with_partitioning(nn.initializers.lecun_normal(), (None, 'model'))
    variables = nn.Dense(3, kernel_init=init).init(jax.random.key(0), jnp.ones((2, 3)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with nn.logical_axis_rules((('embed', None), ('mlp', 'model'))):
            spec = nn.logical_to_mesh(nn.get_partition_spec(variables))
    return repr(spec['params']['kernel']), [w.category.__name__ for w in caught]


def check() -> list[str]:
    import flax.linen

    import linen.nn

    flax_says, linen_says = outcome(flax.linen), outcome(linen.nn)
    return [] if flax_says == linen_says else [f'Flax: {flax_says}; linen: {linen_says}']


if __name__ == '__main__':
    found = check()
    print('\n'.join(found) or 'no difference between Flax and linen')
    sys.exit(1 if found else 0)
