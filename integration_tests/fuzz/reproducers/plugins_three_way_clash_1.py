"""Hand-written reproducer (FINDINGS F6): three third-party distributions export
the same ``linen.nn`` name.

The warning and the error raised when reading the name say "contributed by two
distributions" and name two of them; the third is never named, and the advice
("disable one plugin") does not resolve the clash. `python` this file exits 1
while a clashing distribution goes unreported.
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

CLASS = 'plugins/three-way-clash'


def check() -> list[str]:
    from integration_tests.fuzz.plugin_sets import Plugin, PluginSet, check, probe, write_set

    dists = [f'fz-clash-d{k}' for k in range(3)]
    plugin_set = PluginSet(
        [
            Plugin(d, f'fzpkg_clash_{k}', f'fzepclashx{k}x0z', 0, 'clash_shared', 'FzSharedClash')
            for k, d in enumerate(dists)
        ],  # fmt: skip
        dists,
    )
    with tempfile.TemporaryDirectory() as tmp:
        result = probe(plugin_set, write_set(plugin_set, Path(tmp)))
    return check(plugin_set, result)


if __name__ == '__main__':
    found = check()
    print('\n'.join(found) or 'every clashing distribution is reported')
    sys.exit(1 if found else 0)
