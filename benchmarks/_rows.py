"""Rows of the results table and how their cells read."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Row:
    """One measure across all peers.

    Attributes:
        key: stable identifier (JSON key).
        label: first column of the table.
        target: linen's target for the measure (last column).
        unit: unit of ``medians`` (``s``, ``calls``, ``instructions``...).
        medians: peer -> median value (``None`` when unavailable).
        ratios: peer -> median / pure JAX median, when the row is a ratio row.
        samples: peer -> every repetition's value.
        cells: peer -> the text in the table.
        chart: whether the ratios go in the bar chart.
        extra: anything else worth keeping in the JSON (fingerprints, opcode counts).
    """

    key: str
    label: str
    target: str
    unit: str
    medians: dict[str, float | None] = dataclasses.field(default_factory=dict)
    ratios: dict[str, float | None] = dataclasses.field(default_factory=dict)
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    cells: dict[str, str] = dataclasses.field(default_factory=dict)
    chart: bool = False
    extra: dict[str, object] = dataclasses.field(default_factory=dict)


def human_seconds(s: float) -> str:
    if s >= 1:
        return f'{s:.2f} s'
    if s >= 1e-3:
        return f'{s * 1e3:.1f} ms'
    return f'{s * 1e6:.0f} µs'


def unavailable_cell(reason: str) -> str:
    # Pipes would break the Markdown table.
    return 'unavailable: ' + reason.replace('|', '/')
