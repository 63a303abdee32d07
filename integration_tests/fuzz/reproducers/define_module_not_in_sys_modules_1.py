"""Hand-written reproducer (FINDINGS F1): a Module class defined by code whose
``__module__`` is not in ``sys.modules`` (``exec`` with a fresh namespace, as
notebook tools and code generators do).

Flax defines the class; linen raises ``AttributeError: 'NoneType' object has no
attribute '__dict__'`` from ``dataclasses`` resolving the string annotation
``'str | None'`` that linen-module gives the ``name`` field. `python` this file
prints the difference and exits 1 while it remains.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'define/raises/exec-namespace'
SOURCE = """\
class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        return x
"""


def outcome(nn) -> str:
    try:
        exec(SOURCE, {'__name__': 'generated_code_not_a_module', 'nn': nn})
    except Exception as exc:
        return f'{type(exc).__name__}: {exc}'
    return 'defined'


def check() -> list[str]:
    import flax.linen

    import linen.nn

    flax_says, linen_says = outcome(flax.linen), outcome(linen.nn)
    return [] if flax_says == linen_says else [f'Flax: {flax_says}; linen: {linen_says}']


if __name__ == '__main__':
    found = check()
    print('\n'.join(found) or 'no difference between Flax and linen')
    sys.exit(1 if found else 0)
