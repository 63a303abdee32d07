"""``roofline``: per-module achieved FLOP/s and bytes/s against the device's peaks.

Joins :func:`module_costs` (FLOPs and bytes per module) with :func:`profile`
(time per module) on the module path, each module's own ops (not its
submodules'). For each module: achieved FLOP/s and bytes/s, arithmetic
intensity (FLOPs per byte), the share of the peak it reaches, the roofline time
(the least time the peaks allow, ``max(flops / peak_flops, bytes / peak_bw)``)
and the time lost against it; rows are ranked by time lost.

Peaks come from a small table per device kind (dense bf16/fp16 matmul peak and
memory bandwidth from the vendors' data sheets), or are given explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass

from linen.profiling._report import display_path, format_table, human
from linen.profiling.errors import UnknownDevicePeakError

__all__ = ['DEVICE_PEAKS', 'RooflineRow', 'Roofline', 'roofline']

# device_kind substring -> (peak FLOP/s, peak bytes/s). First match wins, so
# more specific names come first.
DEVICE_PEAKS: dict[str, tuple[float, float]] = {
    'H200': (989e12, 4.8e12),
    'H100': (989e12, 3.35e12),
    'A100-SXM4-80GB': (312e12, 2.039e12),
    'A100': (312e12, 1.555e12),
    'TPU v5p': (459e12, 2.765e12),
    'TPU v5 lite': (197e12, 0.819e12),
    'TPU v4': (275e12, 1.2e12),
}


@dataclass(frozen=True)
class RooflineRow:
    """One module's achieved rates, its roofline time and the time lost against it."""

    path: str
    seconds: float
    flops: float
    bytes_accessed: float
    flops_per_second: float
    bytes_per_second: float
    intensity: float
    flops_share: float  # of the peak FLOP/s
    bandwidth_share: float  # of the peak bytes/s
    roofline_seconds: float
    lost_seconds: float
    bound: str  # 'compute' or 'memory': which peak limits this module's roofline


@dataclass(frozen=True)
class Roofline:
    """What :func:`roofline` returns: one row per module, ranked by time lost; ``r[path]``."""

    rows: tuple[RooflineRow, ...]  # ranked by lost_seconds, largest first
    peak_flops_per_second: float
    peak_bytes_per_second: float
    device_kind: str

    def __getitem__(self, path: str) -> RooflineRow:
        for row in self.rows:
            if row.path == path:
                return row
        known = ', '.join(repr(row.path) for row in self.rows)
        raise KeyError(f'No module path {path!r} in this report; paths: {known}.')

    def __str__(self) -> str:
        body = [
            [
                display_path(row.path),
                f'{1e3 * row.seconds:.3f}',
                f'{1e3 * row.lost_seconds:.3f}',
                human(row.flops_per_second, 'FLOP/s'),
                human(row.bytes_per_second, 'B/s'),
                f'{row.intensity:.2f}',
                f'{100 * row.flops_share:.1f}%',
                f'{100 * row.bandwidth_share:.1f}%',
                row.bound,
            ]
            for row in self.rows
        ]
        return format_table(
            f'Roofline ({self.device_kind or "given peaks"}: '
            f'{human(self.peak_flops_per_second, "FLOP/s")}, '
            f'{human(self.peak_bytes_per_second, "B/s")})',
            ['module', 'ms', 'lost ms', 'FLOP/s', 'bytes/s', 'FLOP/B', '% peak', '% BW', 'bound'],
            body,
        )


def roofline(
    costs,
    times,
    *,
    peak_flops_per_second: float | None = None,
    peak_bytes_per_second: float | None = None,
    device_kind: str | None = None,
) -> Roofline:
    """Per-module roofline of a profiled program.

    Args:
      costs: :func:`module_costs` of the function.
      times: :func:`profile` of the same function (its seconds are summed over
        its steps, so they are divided by ``times.steps``).
      peak_flops_per_second: override the table's peak.
      peak_bytes_per_second: override the table's bandwidth.
      device_kind: the device to look up (default: ``jax.devices()[0].device_kind``).

    Raises:
      UnknownDevicePeakError: the device kind is not in :data:`DEVICE_PEAKS` and
        a peak was not given.
    """
    if device_kind is None:
        import jax

        device_kind = jax.devices()[0].device_kind
    table = next((peaks for key, peaks in DEVICE_PEAKS.items() if key in device_kind), None)
    if peak_flops_per_second is None or peak_bytes_per_second is None:
        if table is None:
            raise UnknownDevicePeakError(device_kind, sorted(DEVICE_PEAKS))
        peak_flops_per_second = peak_flops_per_second or table[0]
        peak_bytes_per_second = peak_bytes_per_second or table[1]
    steps = max(getattr(times, 'steps', 1), 1)
    by_cost = costs.by_path()
    rows = []
    for time_row in times.rows:
        cost = by_cost.get(time_row.path)
        seconds = time_row.seconds / steps
        if cost is None or seconds <= 0:
            continue
        flops, nbytes = cost.flops, cost.bytes_accessed
        ideal = max(flops / peak_flops_per_second, nbytes / peak_bytes_per_second)
        rows.append(
            RooflineRow(
                path=time_row.path,
                seconds=seconds,
                flops=flops,
                bytes_accessed=nbytes,
                flops_per_second=flops / seconds,
                bytes_per_second=nbytes / seconds,
                intensity=flops / nbytes if nbytes else float('inf'),
                flops_share=flops / seconds / peak_flops_per_second,
                bandwidth_share=nbytes / seconds / peak_bytes_per_second,
                roofline_seconds=ideal,
                lost_seconds=max(seconds - ideal, 0.0),
                bound='compute'
                if flops / peak_flops_per_second >= nbytes / peak_bytes_per_second
                else 'memory',
            )
        )
    rows.sort(key=lambda row: -row.lost_seconds)
    return Roofline(tuple(rows), peak_flops_per_second, peak_bytes_per_second, device_kind)
