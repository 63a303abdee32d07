"""Which first-party distribution provides each name of ``linen.nn``.

Used only to explain a missing name; what is available comes from the plugins.
The table must answer for a distribution that is not installed, so it cannot be
read from the plugins themselves: ``_first_party.json`` is written from their
name tables by ``tools/generate_names.py``, and a test fails while it is stale.
"""

from __future__ import annotations

import json
import pkgutil

# (pkgutil asks the package's loader: importlib.resources' readers cost a millisecond
# of imports on the way to `linen.nn`'s first attribute)
_NAMES: dict[str, list[str]] = json.loads(
    pkgutil.get_data(__package__, '_first_party.json') or b'{}'
)

PROVIDED_BY: dict[str, str] = {name: dist for dist, names in _NAMES.items() for name in names}

# Distributions whose names a third-party plugin cannot take over.
FIRST_PARTY: frozenset[str] = frozenset({'linen-core', *_NAMES})


def install_command(dist: str) -> str:
    """The command that installs ``dist`` the way linen-core itself was installed.

    linen-core's ``direct_url.json`` (PEP 610) tells where it came from: a folder of
    a checkout (``packages/linen-core``, maybe editable), a wheel file, or, with no
    such record, an index or a ``--find-links`` folder. A distribution from a
    checkout is installed from its sibling folder, together with the first-party
    distributions it needs that are missing: an index has none of them to offer.
    """
    requirement = f'"linen-core[{dist.removeprefix("linen-")}]"'
    origin = _origin_of_core()
    if origin is None:
        return (
            f'pip install {requirement} (from built wheels: add --find-links and their '
            'folder, e.g. dist/ after `nox -s build`)'
        )
    path, editable = origin
    if path.suffix == '.whl':
        return f'pip install --find-links {_quote(path.parent)} {requirement}'
    packages = path.parent
    if not (packages / dist / 'pyproject.toml').is_file():
        return f'pip install {requirement}'
    flag = '-e ' if editable else ''
    folders = [packages / name for name in _with_missing_dependencies(dist, packages)]
    return 'pip install ' + ' '.join(flag + _quote(folder) for folder in folders)


def _origin_of_core():
    """``(path, editable)`` of the folder or wheel linen-core was installed from, or None."""
    import json
    from importlib import metadata
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    try:
        record = metadata.distribution('linen-core').read_text('direct_url.json')
    except metadata.PackageNotFoundError:
        return None
    if not record:
        return None
    try:
        info = json.loads(record)
        url = urlparse(info['url'])
    except (ValueError, KeyError, TypeError):
        return None
    if url.scheme != 'file':
        return None
    return Path(unquote(url.path)), bool(info.get('dir_info', {}).get('editable'))


def _with_missing_dependencies(dist: str, packages) -> list[str]:
    """``dist`` and the first-party distributions it needs that are not installed."""
    import re
    import tomllib
    from importlib import metadata

    found: list[str] = []
    pending = [dist]
    while pending:
        name = pending.pop(0)
        if name in found:
            continue
        found.append(name)
        try:
            project = tomllib.loads((packages / name / 'pyproject.toml').read_text())['project']
        except (OSError, ValueError, KeyError):
            continue
        for requirement in project.get('dependencies', []):
            sibling = re.match(r'\s*(linen-[a-z0-9-]+)', requirement)
            if sibling is None or sibling.group(1) in found:
                continue
            try:
                metadata.version(sibling.group(1))
            except metadata.PackageNotFoundError:
                pending.append(sibling.group(1))
    return found


def _quote(path) -> str:
    import shlex

    return shlex.quote(str(path))
