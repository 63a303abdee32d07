"""The plugin-set fuzzer: random sets of healthy and broken plugin distributions.

Each set is a few distributions written straight into throwaway directories (a
package and a ``.dist-info`` with ``METADATA`` and ``entry_points.txt``: what
``importlib.metadata`` finds on ``sys.path``, no installer needed), each with one
to three entry points in group ``linen`` of a random :data:`KINDS`. A fresh
interpreter, with the directories on ``PYTHONPATH`` in a random order (and now
and then one plugin disabled through ``LINEN_DISABLE_PLUGINS``), imports
``linen.nn`` and reports the warnings it gave, ``dir(nn)`` and what reading each
generated name gives. Then, for every plugin:

- a healthy name resolves to its object; the first-party ``nn.Dense`` and
  ``nn.Module`` still do;
- every fault is reported against its culprit: a warning (or the error raised when
  reading the name) names its entry point *and* its distribution;
- a name exported by two third-party distributions is withheld, with an error
  naming both; one clashing with a first-party name stays first-party;
- a disabled plugin is silent and absent;
- no warning blames nobody (every warning names one of the set's distributions).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A hang is a failure of the set; generous, as a loaded machine imports JAX slowly.
PROBE_TIMEOUT_S = 300

# kind -> how likely it is drawn
KINDS = {
    'healthy': 4,
    'healthy_lazy': 3,
    'clash_first_party': 1,
    'clash_shared': 2,
    'raises': 1,
    'returns_list': 1,
    'misspelled': 1,
    'import_error': 1,
    'missing_module': 1,
    'missing_attr': 1,
    'syntax_error': 1,
    'bad_lazy': 1,
}
FAULTY = {'raises', 'returns_list', 'misspelled', 'import_error', 'missing_module',
          'missing_attr', 'syntax_error'}  # fmt: skip


@dataclass(frozen=True)
class Plugin:
    dist: str
    package: str
    entry_point: str
    index: int
    kind: str
    shared: str = ''  # clash_shared: the name shared with other distributions

    @property
    def own_name(self) -> str:
        return f'Fz{self.entry_point.capitalize()}'

    def names(self) -> list[str]:
        if self.kind in ('healthy', 'healthy_lazy', 'bad_lazy', 'clash_first_party'):
            return [self.own_name]
        if self.kind == 'clash_shared':
            return [self.own_name, self.shared]
        return []


@dataclass
class PluginSet:
    plugins: list[Plugin]
    order: list[str]  # distributions in PYTHONPATH order
    disabled: str | None = None  # an entry-point name in LINEN_DISABLE_PLUGINS

    def describe(self) -> str:
        rows = [f'{p.dist}:{p.entry_point}={p.kind}{"(" + p.shared + ")" if p.shared else ""}'
                for p in self.plugins]  # fmt: skip
        return f'order {self.order}, disabled {self.disabled}: ' + ', '.join(rows)


def draw_set(rng: random.Random, tag: str) -> PluginSet:
    plugins = []
    dists = [f'fz-{tag}-d{k}' for k in range(rng.randint(1, 5))]
    shared_pool = [f'FzShared{tag}{s}' for s in range(rng.randint(1, 2))]
    for k, dist in enumerate(dists):
        for j in range(rng.randint(1, 3)):
            kind = rng.choices(list(KINDS), list(KINDS.values()))[0]
            shared = rng.choice(shared_pool) if kind == 'clash_shared' else ''
            plugins.append(Plugin(dist, f'fzpkg_{tag}_{k}', f'fzep{tag}x{k}x{j}z', j, kind, shared))
    order = list(dists)
    rng.shuffle(order)
    disabled = rng.choice(plugins).entry_point if rng.random() < 0.2 else None
    return PluginSet(plugins, order, disabled)


_CLASS = """
class P{index}:
    @staticmethod
    @hookimpl
    def {hook}():
        {body}
"""


def _plugin_code(p: Plugin) -> str:
    target = f'{p.package}.plugins:P{p.index}'
    bodies = {
        'healthy': f"return {{'{p.own_name}': P{p.index}}}",
        'healthy_lazy': f"return {{'{p.own_name}': '{target}'}}",
        'clash_first_party': f"return {{'Dense': P{p.index}, '{p.own_name}': P{p.index}}}",
        'clash_shared': f"return {{'{p.shared}': P{p.index}, '{p.own_name}': P{p.index}}}",
        'raises': f"raise RuntimeError('fuzzed plugin {p.entry_point} raised')",
        'returns_list': f"return ['{p.own_name}']",
        'misspelled': f"return {{'{p.own_name}': P{p.index}}}",
        'bad_lazy': f"return {{'{p.own_name}': '{p.package}.plugins:Missing{p.index}'}}",
    }
    hook = 'linen_export' if p.kind == 'misspelled' else 'linen_exports'
    body = bodies.get(p.kind, 'return {}')
    return _CLASS.format(index=p.index, hook=hook, body=body)


def _entry_target(p: Plugin) -> str:
    if p.kind == 'import_error':
        return f'{p.package}.broken{p.index}'
    if p.kind == 'syntax_error':
        return f'{p.package}.syntax{p.index}'
    if p.kind == 'missing_module':
        return f'{p.package}.nonexistent{p.index}'
    if p.kind == 'missing_attr':
        return f'{p.package}.plugins:Nope{p.index}'
    return f'{p.package}.plugins:P{p.index}'


def write_set(plugin_set: PluginSet, where: Path) -> dict[str, Path]:
    """One site directory per distribution; returns dist -> directory."""
    sites = {}
    by_dist: dict[str, list[Plugin]] = {}
    for p in plugin_set.plugins:
        by_dist.setdefault(p.dist, []).append(p)
    for dist, plugins in by_dist.items():
        site = where / dist
        package = site / plugins[0].package
        package.mkdir(parents=True)
        (package / '__init__.py').write_text('')
        code = 'from linen.core.hookspecs import hookimpl\n' + ''.join(map(_plugin_code, plugins))
        (package / 'plugins.py').write_text(code)
        for p in plugins:
            if p.kind == 'import_error':
                (package / f'broken{p.index}.py').write_text(
                    f"raise ImportError('{p.package} needs a package that is not installed')\n"
                )
            if p.kind == 'syntax_error':
                (package / f'syntax{p.index}.py').write_text('def broken(:\n')
        info = site / f'{dist.replace("-", "_")}-0.1.dist-info'
        info.mkdir()
        (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n')
        lines = ['[linen]'] + [f'{p.entry_point} = {_entry_target(p)}' for p in plugins]
        (info / 'entry_points.txt').write_text('\n'.join(lines) + '\n')
        sites[dist] = site
    return sites


_PROBE = """
import json, warnings
NAMES = {names!r}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    import linen.nn as nn
    listed = sorted(n for n in dir(nn) if n.startswith('Fz'))
    access = {{}}
    for name in NAMES:
        try:
            value = getattr(nn, name)
        except Exception as exc:
            access[name] = ['error', type(exc).__name__, str(exc),
                            [c.__name__ for c in type(exc).__mro__]]
        else:
            access[name] = ['ok', getattr(value, '__module__', ''),
                            getattr(value, '__qualname__', '')]
    from linen.layers import Dense
    first_party = [nn.Dense is Dense, nn.Module.__name__]
print(json.dumps({{
    'warnings': [[w.category.__name__, str(w.message)] for w in caught],
    'listed': listed, 'access': access, 'first_party': first_party,
}}))
"""


def probe(plugin_set: PluginSet, sites: dict[str, Path]) -> dict:
    names = sorted({n for p in plugin_set.plugins for n in p.names()} | {'FzNeverExported'})
    env = dict(os.environ)
    env.pop('LINEN_DISABLE_PLUGINS', None)
    paths = [str(sites[d]) for d in plugin_set.order]
    env['PYTHONPATH'] = os.pathsep.join(
        paths + [env['PYTHONPATH']] if env.get('PYTHONPATH') else paths
    )
    env['JAX_PLATFORMS'] = 'cpu'
    if plugin_set.disabled:
        env['LINEN_DISABLE_PLUGINS'] = plugin_set.disabled
    try:
        result = subprocess.run(
            [sys.executable, '-c', textwrap.dedent(_PROBE.format(names=names))],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=PROBE_TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {'crashed': f'importing linen.nn hung for {PROBE_TIMEOUT_S} s'}
    if result.returncode != 0:
        return {'crashed': result.stderr[-2000:]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def check(plugin_set: PluginSet, result: dict) -> list[str]:
    """What went wrong with this set, as sentences (empty: every fault isolated)."""
    if 'crashed' in result:
        return [f'importing linen.nn crashed: {result["crashed"]}']
    problems = []
    warnings = result['warnings']
    access = result['access']
    dists = {p.dist for p in plugin_set.plugins}
    if result['first_party'] != [True, 'Module']:
        problems.append(f'first-party names broken: {result["first_party"]}')

    def blamed(p: Plugin) -> list[str]:
        return [m for _, m in warnings if p.entry_point in m and p.dist in m]

    live = [p for p in plugin_set.plugins if p.entry_point != plugin_set.disabled]
    exporters: dict[str, set[str]] = {}
    for p in live:
        if p.kind == 'clash_shared':
            exporters.setdefault(p.shared, set()).add(p.dist)
    for p in plugin_set.plugins:
        where = f'{p.dist}:{p.entry_point} ({p.kind})'
        if p not in live:
            if blamed(p):
                problems.append(f'{where}: disabled, yet warned about: {blamed(p)[0][:200]}')
            for name in p.names():
                if name == p.own_name and access[name][0] == 'ok':
                    problems.append(f'{where}: disabled, yet {name} resolves')
            continue
        if p.kind in FAULTY and not blamed(p):
            problems.append(f'{where}: its failure is not reported against it ({warnings})')
        if p.kind == 'misspelled' and not any(
            c == 'PluginHookNameWarning' and p.entry_point in m for c, m in warnings
        ):
            problems.append(f'{where}: no PluginHookNameWarning')
        if p.kind in ('healthy', 'healthy_lazy', 'clash_first_party', 'clash_shared'):
            got = access[p.own_name]
            if got != ['ok', f'{p.package}.plugins', f'P{p.index}']:
                problems.append(f'{where}: nn.{p.own_name} gives {got}')
            if p.own_name not in result['listed']:
                problems.append(f'{where}: {p.own_name} not in dir(linen.nn)')
        if p.kind == 'clash_first_party' and not any(
            'Dense' in m and p.dist in m for _, m in warnings
        ):
            problems.append(f'{where}: its clash with linen.nn.Dense is not reported against it')
        if p.kind == 'bad_lazy':
            got = access[p.own_name]
            if got[0] != 'error' or p.entry_point not in got[2] or p.dist not in got[2]:
                problems.append(f'{where}: reading nn.{p.own_name} gives {got}')
    for shared, owners in exporters.items():
        got = access[shared]
        if len(owners) == 1:
            if got[0] != 'ok':
                problems.append(f'{shared} exported by {owners} alone gives {got}')
            continue
        if got[0] != 'error' or 'AttributeError' not in got[3]:
            problems.append(f'{shared} exported by {sorted(owners)} gives {got}')
            continue
        tag = '[three-way-clash] ' if len(owners) > 2 else ''
        for owner in owners:
            if owner not in got[2] and not any(shared in m and owner in m for _, m in warnings):
                problems.append(
                    f'{tag}{shared}: the clash is not reported against {owner} ({got[2][:200]})'
                )
    if access['FzNeverExported'][0] != 'error':
        problems.append(f'FzNeverExported resolves: {access["FzNeverExported"]}')
    for category, message in warnings:
        if not any(d in message for d in dists):
            problems.append(f'a warning blames none of the set: {category}: {message[:200]}')
    return problems


def known_tag(problem: str) -> str | None:
    """The finding (``known.PLUGIN_PROBLEMS``) a problem is an instance of, if any."""
    from integration_tests.fuzz.known import PLUGIN_PROBLEMS

    for tag, finding in PLUGIN_PROBLEMS.items():
        if problem.startswith(f'[{tag}] '):
            return finding
    return None


@dataclass
class Report:
    seed: str
    sets: int = 0
    known: Counter = field(default_factory=Counter)
    plugins: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    failures: list[tuple[str, list[str]]] = field(default_factory=list)

    def status(self) -> str:
        return f'{self.sets} sets, {len(self.failures)} failing'

    def summary(self) -> str:
        lines = [f'plugin-set fuzzing, seed {self.seed}: {self.sets} sets in {self.seconds:.0f} s '
                 f'({sum(self.plugins.values())} plugins: {dict(self.plugins)}); '
                 f'{len(self.failures)} sets failed to isolate their faults; '
                 f'known findings: {dict(self.known) or "none"}']  # fmt: skip
        for description, problems in self.failures[:10]:
            lines.append(f'  {description}')
            lines += [f'    - {p}' for p in problems[:6]]
        return '\n'.join(lines)


def run(seed: str | int, sets: int, on_set: Callable[[int, Report], None] | None = None) -> Report:
    report = Report(str(seed))
    rng = random.Random(f'plugins:{seed}')
    start = time.monotonic()
    for i in range(sets):
        plugin_set = draw_set(rng, f'{i}')
        report.plugins.update(p.kind for p in plugin_set.plugins)
        with tempfile.TemporaryDirectory(prefix='linen-plugin-set-') as tmp:
            result = probe(plugin_set, write_set(plugin_set, Path(tmp)))
        problems = []
        for problem in check(plugin_set, result):
            finding = known_tag(problem)
            if finding is None:
                problems.append(problem)
            else:
                report.known[finding] += 1
        if problems:
            report.failures.append((plugin_set.describe(), problems))
        report.sets += 1
        report.seconds = time.monotonic() - start
        if on_set is not None:
            on_set(i + 1, report)
    return report


__all__ = [
    'KINDS',
    'Plugin',
    'PluginSet',
    'Report',
    'check',
    'draw_set',
    'probe',
    'run',
    'write_set',
]
