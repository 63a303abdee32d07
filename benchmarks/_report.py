"""Write the results: a Markdown table, the JSON behind it and a bar chart of ratios."""

from __future__ import annotations

import json
import math
import platform
from pathlib import Path
from typing import Any

from benchmarks._peers import Peer
from benchmarks._rows import Row


def markdown(rows: list[Row], peers: tuple[Peer, ...], header: str) -> str:
    """The results table: rows = measures, columns = peers, then the target for linen."""
    lines = [header, '']
    lines.append('| measure | ' + ' | '.join(p.label for p in peers) + ' | target for linen |')
    lines.append('|---|' + '---:|' * len(peers) + '---:|')
    for row in rows:
        cells = [row.cells.get(p.name, '') for p in peers]
        lines.append(f'| {row.label} | ' + ' | '.join(cells) + f' | {row.target} |')
    return '\n'.join(lines) + '\n'


def to_json(rows: list[Row], peers: tuple[Peer, ...], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        'meta': meta,
        'peers': {p.name: p.label for p in peers},
        'rows': {
            r.key: {
                'label': r.label,
                'target': r.target,
                'unit': r.unit,
                'medians': r.medians,
                'ratios_to_jax': r.ratios,
                'samples': r.samples,
                'cells': r.cells,
                'extra': r.extra,
            }
            for r in rows
        },
    }


def bar_chart(rows: list[Row], peers: tuple[Peer, ...], path: Path) -> None:
    """Grouped bars of each chart row's ratio to pure JAX, log scale, one colour per peer."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    chart_rows = [r for r in rows if r.chart]
    shown = [p for p in peers if p.name != 'jax']
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(chart_rows) + 2), 5))
    width = 0.8 / max(1, len(shown))
    for i, peer in enumerate(shown):
        xs, ys = [], []
        for j, row in enumerate(chart_rows):
            ratio = row.ratios.get(peer.name)
            if ratio is not None and math.isfinite(ratio) and ratio > 0:
                xs.append(j + (i - (len(shown) - 1) / 2) * width)
                ys.append(ratio)
        ax.bar(xs, ys, width=width, label=peer.label)
    ax.axhline(1.0, color='black', linewidth=0.8)
    ax.set_yscale('log')
    ax.set_xticks(range(len(chart_rows)))
    ax.set_xticklabels([r.key for r in chart_rows], rotation=40, ha='right', fontsize=8)
    ax.set_ylabel('× pure JAX (median, log scale)')
    ax.set_title('Cost relative to pure JAX (1.0 = pure JAX)')
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def environment() -> dict[str, Any]:
    import jax

    versions = {'python': platform.python_version(), 'jax': jax.__version__}
    for dist in ('flax', 'dm-haiku', 'equinox', 'linen-core', 'linen-module', 'linen-layers'):
        try:
            from importlib.metadata import version

            versions[dist] = version(dist)
        except Exception:
            versions[dist] = None
    return {'versions': versions, 'machine': platform.machine(), 'cpus': _cpus()}


def _cpus() -> int | None:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


def write(out: Path, rows: list[Row], peers: tuple[Peer, ...], meta: dict[str, Any]) -> str:
    """Write ``results.md``, ``results.json`` and ``ratios.png`` under ``out``; return the table."""
    out.mkdir(parents=True, exist_ok=True)
    v = meta['environment']['versions']
    header = (
        f'Benchmarks ({meta["mode"]}, {meta.get("fast_reps", meta["reps"])} interleaved '
        f'repetitions for traces, init and per-call rows, {meta["reps"]} elsewhere, medians; '
        f'JAX {v["jax"]}, Flax {v["flax"]}, Haiku {v["dm-haiku"]}, Equinox {v["equinox"]}, '
        f'{meta["environment"]["cpus"]} CPUs, {meta["wall_s"]:.0f} s). '
        'Ratios are to pure JAX in the same run. Pure JAX is the fastest idiomatic code a '
        'JAX user writes for the same math (`x @ kernel + bias` with the bias broadcast, no '
        "eager reshapes, no extra Python per layer), under JAX's default settings."
    )
    table = markdown(rows, peers, header)
    (out / 'results.md').write_text(table)
    (out / 'results.json').write_text(json.dumps(to_json(rows, peers, meta), indent=1, default=str))
    bar_chart(rows, peers, out / 'ratios.png')
    return table
