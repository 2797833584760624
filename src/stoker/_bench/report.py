"""The printed report: a one-line header about the machine and a table of results."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .harness import WorkloadResult

__all__ = ["header", "table"]

COLUMNS = (
    "workload",
    "loader",
    "samples/s",
    "GB/s",
    "vs torch",
    "vs bare",
    "epoch s [min, max]",
    "build s",
)
LEGEND = (
    "epoch s: iter(loader) to the last batch, median of the runs; vs X: times faster than X\n"
    "build s: building the dataset and loader, not part of the epoch; GB/s: record payload"
)
_LEFT = 2  # the first columns are text, aligned left; the rest are numbers


def header(machine: dict[str, Any], repeats: int) -> str:
    """One line: versions, CPU, and how many runs each median is taken over."""
    torch = machine["torch"] or "not installed"
    return (
        f"stoker {machine['stoker']} | torch {torch} | numpy {machine['numpy']} | "
        f"python {machine['python']} | {machine['cpus_usable']} CPUs, {machine['processor']} | "
        f"median of {repeats} epoch{'s' if repeats != 1 else ''}"
    )


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def table(results: list[WorkloadResult]) -> str:
    """The results as an aligned text table, one row per (workload, loader)."""
    lines: list[tuple[str, ...]] = [COLUMNS]
    for result in results:
        for row in result.rows:
            spread = f"{row.median:.3f} [{min(row.seconds):.3f}, {max(row.seconds):.3f}]"
            lines.append(
                (
                    result.name,
                    row.loader,
                    f"{row.samples_per_s:,.0f}",
                    f"{row.gb_per_s:.3f}",
                    _ratio(result.ratio(row, "torch")),
                    _ratio(result.ratio(row, "bare")),
                    spread,
                    f"{statistics.median(row.build_seconds):.3f}",
                )
            )
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    rendered = []
    for line in lines:
        cells = [
            cell.ljust(width) if i < _LEFT else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        rendered.append("  ".join(cells).rstrip())
    rendered.insert(1, "  ".join("-" * width for width in widths))
    rendered.append(LEGEND)
    return "\n".join(rendered)
