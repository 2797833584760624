"""The printed report: a one-line header about the machine, a table of results, and notes.

The notes under the table say how close rows with a known limit came to it, and
whether each workload's targets were met; the closing line counts the targets met.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .results import Row, TargetResult, WorkloadResult

__all__ = ["header", "notes", "table", "target_summary", "workloads"]

COLUMNS = (
    "workload",
    "loader",
    "samples/s",
    "GB/s",
    "vs torch",
    "warm vs torch",
    "vs bare",
    "epoch s [min, max]",
    "1st batch s",
    "build s",
)
LEGEND = (
    "epoch s: iter(loader) to the last batch, median of the runs; vs X: times faster than X\n"
    "1st batch s: building a fresh loader to holding its first batch, median of the runs\n"
    "warm vs torch: the same loader's second epoch against torch's second epoch\n"
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


def workloads(results: list[WorkloadResult]) -> str:
    """What each workload ran on, with the sizes really used: a heading, one indented line each."""
    width = max((len(result.name) for result in results), default=0)
    lines = [f"  {result.name.ljust(width)}  {result.summary}" for result in results]
    return "\n".join(["data, as run:", *lines])


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _label(row: Row) -> str:
    if row.show_mode and row.worker_mode is not None:
        return f"{row.loader} -> {row.worker_mode}"
    return row.loader


def table(results: list[WorkloadResult]) -> str:
    """The results as an aligned text table, one row per (workload, loader)."""
    lines: list[tuple[str, ...]] = [COLUMNS]
    for result in results:
        for row in result.rows:
            spread = f"{row.median:.3f} [{min(row.seconds):.3f}, {max(row.seconds):.3f}]"
            lines.append(
                (
                    result.name,
                    _label(row),
                    f"{row.samples_per_s:,.0f}",
                    f"{row.gb_per_s:.3f}",
                    _ratio(result.ratio(row, "torch")),
                    _ratio(result.warm_ratio(row, "torch")),
                    _ratio(result.ratio(row, "bare")),
                    spread,
                    f"{row.first_batch_median:.3f}",
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


def _target(target: TargetResult) -> str:
    if target.measure == "speed":
        value = "-" if target.value is None else f"{target.value:.2f}x"
        warm = "" if target.warm is None else f"; second epoch {target.warm:.2f}x"
        return f"{value} torch's samples/s (target >= {target.bound:.2f}x{warm})"
    if target.measure == "peer_speed":
        value = "-" if target.value is None else f"{target.value:.2f}x"
        return (
            f"{value} the best other loader's samples/s ({target.versus or 'none'}; "
            f"target >= {target.bound:.2f}x)"
        )
    if target.measure == "first_batch":
        value = "-" if target.value is None else f"{target.value:.2f}x"
        return f"first batch in {value} torch's time (target <= {target.bound:.2f}x)"
    value = "-" if target.value is None else f"{target.value:.0%}"
    return f"{value} of its samples/s limit (target >= {target.bound:.0%})"


def notes(results: list[WorkloadResult]) -> str:
    """Lines for rows with a samples/s limit and for every target; empty when there are none."""
    lines = []
    for result in results:
        for row in result.rows:
            if row.limit is not None and row.of_limit is not None:
                lines.append(
                    f"limit: {result.name} / {row.loader}: {row.samples_per_s:,.0f} samples/s "
                    f"is {row.of_limit:.0%} of its limit of {row.limit:,.0f}"
                )
    for result in results:
        for target in result.target_results():
            verdict = {True: "met", False: "not met", None: "not measured"}[target.met]
            lines.append(f"target {verdict}: {result.name} / {target.loader}: {_target(target)}")
    return "\n".join(lines)


def target_summary(results: list[WorkloadResult]) -> str:
    """One calm closing line: how many targets were met here, and where they are explained.

    Targets are ratios stoker aims for against torch on a 2-core machine; a busy or
    different machine may fall short of some, which says nothing about whether the
    batches were right (the ``verified`` line says that). Empty when no workload has
    targets.

    Example:
        >>> target_summary([])
        ''
    """
    verdicts = [t.met for result in results for t in result.target_results()]
    if not verdicts:
        return ""
    measured = [met for met in verdicts if met is not None]
    where = "see docs/benchmarks.md for what they mean"
    if not measured:
        return f"targets: none measured (they compare with torch, not run here); {where}"
    unmeasured = len(verdicts) - len(measured)
    rest = f", {unmeasured} not measured" if unmeasured else ""
    return f"targets: {sum(measured)} of {len(measured)} met on this machine{rest}; {where}"
