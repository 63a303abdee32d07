"""``Report``: costs, times, memory and trace time joined per module path.

Each part is optional; a column a part did not provide is ``None`` (shown as
``n/a``), never 0. A report renders as a table (120 columns wide by default, the
module tree indented; ``to_text(width=None)`` gives full paths and column names),
exports to JSON and to a pandas DataFrame, and diffs against another report
(A/B, per module).
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass
from typing import Any

from linen.profiling._report import UNLABELLED, display_path, format_table, human
from linen.profiling._tree import indented_name

__all__ = ['Report', 'ReportDiff']

# column -> (source part, attribute of that part's row)
_COLUMNS: dict[str, tuple[str, str]] = {
    'flops': ('costs', 'inclusive_flops'),
    'bytes_accessed': ('costs', 'inclusive_bytes_accessed'),
    'forward_flops': ('costs', 'forward_flops'),
    'backward_flops': ('costs', 'backward_flops'),
    'recompute_flops': ('costs', 'recompute_flops'),
    'seconds': ('times', 'inclusive_seconds'),
    'params_bytes': ('memory', 'inclusive_params_bytes'),
    'optimizer_bytes': ('memory', 'inclusive_optimizer_bytes'),
    'activations_bytes': ('memory', 'inclusive_activations_bytes'),
    'trace_seconds': ('trace', 'inclusive_seconds'),
}

# The narrow table's column headings; _LEGEND says what they mean.
_SHORT = {
    'flops': 'FLOPs',
    'bytes_accessed': 'bytes',
    'forward_flops': 'fwd',
    'backward_flops': 'bwd',
    'recompute_flops': 'remat',
    'seconds': 'time',
    'params_bytes': 'params',
    'optimizer_bytes': 'opt',
    'activations_bytes': 'acts',
    'trace_seconds': 'trace',
}
_LEGEND = {
    'flops': 'FLOPs/bytes: FLOPs and bytes accessed; every row includes its submodules',
    'forward_flops': 'fwd/bwd/remat: FLOPs of the forward pass, the backward pass and remat recomputation',
    'seconds': 'time: device time per step',
    'params_bytes': 'params/opt: bytes of parameters and of optimizer state',
    'activations_bytes': 'acts: bytes of saved activations',
    'trace_seconds': 'trace: Python time spent tracing the module',
}
_NO_MODULE = (
    f'{UNLABELLED}: work outside every module (the loss, the optimizer update, what JAX adds '
    'around them); its trace time is all the Python tracing outside modules (jax.grad, '
    'optax, jit), so it can exceed the root'
)
# A method named by a lambda (nn.remat's wrapper of a module call) is no row of its
# own: its numbers belong to the module that owns it.
_LAMBDA = '.<lambda>'


@dataclass(frozen=True)
class Report:
    """One row per module path: ``{path: {column: value or None}}`` (inclusive values)."""

    rows: dict[str, dict[str, float | None]]
    columns: tuple[str, ...]

    @classmethod
    def join(cls, *, costs=None, times=None, memory=None, trace=None) -> Report:
        """Join the reports given (``module_costs``, ``profile``, ``module_memory``, ``trace_times``).

        ``profile`` times are per step. ``module_memory`` paths, which lack the
        root module's label, are matched to the label paths that end with them.
        """
        parts = {'costs': costs, 'times': times, 'memory': memory, 'trace': trace}
        columns = tuple(
            c
            for c, (part, _) in _COLUMNS.items()
            if parts[part] is not None
            # Activations are a column only when they were measured.
            and (c != 'activations_bytes' or memory.activations_bytes is not None)
        )
        by_part = {
            name: {row.path: row for row in part.rows}
            for name, part in parts.items()
            if part is not None
        }
        paths: dict[str, None] = {}
        for name, rows in by_part.items():
            if name != 'memory':
                paths.update(dict.fromkeys(rows))
        label_paths = list(paths)
        memory_rows = by_part.get('memory', {})
        if memory_rows and not label_paths:
            paths.update(dict.fromkeys(memory_rows))
        # The one top-level label, when the reports saw a single root module.
        roots = [p for p in label_paths if p and '/' not in p]
        root = roots[0] if len(roots) == 1 else None
        steps = max(getattr(times, 'steps', 1), 1) if times is not None else 1
        rows: dict[str, dict[str, float | None]] = {}
        for path in paths:
            row: dict[str, float | None] = {}
            for column in columns:
                part, attribute = _COLUMNS[column]
                source = by_part[part].get(path)
                if part == 'memory' and source is None and label_paths:
                    source = next(
                        (
                            r
                            for p, r in memory_rows.items()
                            if p and (path == p or path.endswith('/' + p))
                        ),
                        None,
                    )
                if part == 'memory' and source is None and path == root:
                    # The root module's label: its inclusive memory is the whole
                    # tree's (module_memory's paths start below the root).
                    value = getattr(memory, attribute.removeprefix('inclusive_'))
                else:
                    value = getattr(source, attribute) if source is not None else None
                if part == 'times' and value is not None:
                    value = value / steps
                row[column] = value
            rows[path] = row
        return cls(rows=_fold_lambda_rows(rows), columns=columns)

    def to_dict(self) -> dict[str, Any]:
        return {'columns': list(self.columns), 'rows': self.rows}

    def to_json(self, **kwargs: Any) -> str:
        """The report as JSON (``None`` for values a part did not provide)."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_json(cls, text: str) -> Report:
        data = json.loads(text)
        return cls(rows=data['rows'], columns=tuple(data['columns']))

    def to_pandas(self):
        """A ``pandas.DataFrame`` indexed by module path (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as error:
            raise ImportError(
                'Report.to_pandas needs pandas, which is not installed: pip install pandas '
                '(or use Report.to_dict / to_json).'
            ) from error
        frame = pd.DataFrame.from_dict(self.rows, orient='index', columns=list(self.columns))
        frame.index.name = 'path'
        return frame

    def diff(self, other: Report) -> ReportDiff:
        """``other`` minus ``self`` per module and column (A/B: before, after)."""
        columns = tuple(c for c in self.columns if c in other.columns)
        rows = {}
        for path in dict.fromkeys([*self.rows, *other.rows]):
            before, after = self.rows.get(path, {}), other.rows.get(path, {})
            row = {}
            for column in columns:
                a, b = before.get(column), after.get(column)
                row[column] = None if a is None or b is None else b - a
            rows[path] = row
        return ReportDiff(rows=rows, columns=columns, before=self, after=other)

    def to_text(self, width: int | None = 120) -> str:
        """The report as a plain-text table, at most ``width`` characters wide.

        The narrow table indents the module tree, shows three significant digits and
        short column names with a legend, and elides module names that do not fit.

        Args:
          width: the widest line; ``None`` gives full module paths, column names and
            figures, however wide.

        >>> report = Report(rows={'Net': {'flops': 1234.0}}, columns=('flops',))
        >>> print(report.to_text(width=None))
        Profile per module
        module |  flops
        -------+-------
        Net    | 1.23 k
        """
        return _table('Profile per module', self.rows, self.columns, width)

    def __str__(self) -> str:
        return self.to_text()

    def __rich__(self):
        return _rich_table('Profile per module', self.rows, self.columns)


@dataclass(frozen=True)
class ReportDiff:
    """Per module and column: after minus before (``None`` where either is missing)."""

    rows: dict[str, dict[str, float | None]]
    columns: tuple[str, ...]
    before: Report
    after: Report

    def to_text(self, width: int | None = 120) -> str:
        """The change as a plain-text table; ``width`` as for ``Report.to_text``."""
        return _table('Change per module (after - before)', self.rows, self.columns, width)

    def __str__(self) -> str:
        return self.to_text()

    def __rich__(self):
        return _rich_table('Change per module (after - before)', self.rows, self.columns)


def _fold_lambda_rows(rows: dict[str, dict]) -> dict[str, dict]:
    """Add each ``path.<lambda>`` row into its module's row (created if missing)."""
    folded: dict[str, dict] = {}
    for path, row in rows.items():
        if not path.endswith(_LAMBDA):
            folded[path] = dict(row)
    for path, row in rows.items():
        if path.endswith(_LAMBDA):
            owner = folded.setdefault(path.removesuffix(_LAMBDA), dict.fromkeys(row))
            for column, value in row.items():
                if value is not None:
                    owner[column] = (owner.get(column) or 0.0) + value
    return folded


def _cell(column: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 'n/a'
    if column.endswith('seconds'):
        return f'{1e3 * value:.3f} ms'
    if column.endswith('bytes') or column == 'bytes_accessed':
        return human(value, 'B')
    return human(value)


def _short_cell(column: str, value: float | None) -> str:
    """Three significant digits: the narrow table's cells."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 'n/a'
    if column.endswith('seconds'):
        if abs(value) >= 1.0:
            return f'{value:.3g} s'
        if abs(value) >= 1e-3 or value == 0:
            return f'{1e3 * value:.3g} ms'
        return f'{1e6 * value:.3g} \u00b5s'
    unit = 'B' if column.endswith('bytes') or column == 'bytes_accessed' else ''
    for factor, prefix in ((1e12, 'T'), (1e9, 'G'), (1e6, 'M'), (1e3, 'k')):
        if abs(value) >= factor:
            return f'{value / factor:.3g} {prefix}{unit}'
    return f'{value:.3g} {unit}'.rstrip()


def _table(title: str, rows: dict, columns: tuple[str, ...], width: int | None = None) -> str:
    if width is None:
        body = [
            [display_path(path), *(_cell(c, row.get(c)) for c in columns)]
            for path, row in rows.items()
        ]
        table = format_table(title, ['module', *columns], body)
    else:
        names = [indented_name(path) for path in rows]
        cells = [[_short_cell(c, row.get(c)) for c in columns] for row in rows.values()]
        header = ['module', *(_SHORT.get(c, c) for c in columns)]
        others = sum(
            max([len(h), *(len(r[i]) for r in cells)]) + 3 for i, h in enumerate(header[1:])
        )
        room = max(width - others, 12)
        names = [n if len(n) <= room else n[: room - 1] + '\u2026' for n in names]
        table = format_table(title, header, [[n, *r] for n, r in zip(names, cells, strict=True)])
    notes = [text for column, text in _LEGEND.items() if column in columns and width is not None]
    if '' in rows:
        notes.append(_NO_MODULE)
    if width is not None:
        notes = [textwrap.fill(note, width, subsequent_indent='  ') for note in notes]
    return '\n'.join([table, *notes])


def _rich_table(title: str, rows: dict, columns: tuple[str, ...]):
    """A ``rich.table.Table`` (``rich.print(report)`` shows it in a terminal)."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column('module')
    for column in columns:
        table.add_column(column, justify='right')
    for path, row in rows.items():
        name = indented_name(path)
        table.add_row(name, *(_cell(c, row.get(c)) for c in columns))
    return table
