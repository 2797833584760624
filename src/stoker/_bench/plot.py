"""``stoker bench --plot``: the results as a PNG, one panel of bars per workload.

Each panel shows every loader of one workload (the row labels name the worker count,
``stoker x16``, ``torch x2``, and the panel title the workload's own) with its median
samples/s; a stoker bar is labelled with its speed relative to the PyTorch row it is
compared with in the same run. matplotlib is imported here only (``pip install
'stoker[plot]'``), and only its object API is used, so no window or global backend is
touched.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["plot_results"]

_COLOURS = {"stoker": "#d9480f", "torch": "#1c7ed6", "bare": "#868e96"}


def _load_matplotlib() -> tuple[Any, Any]:
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import EngFormatter
    except ImportError as exc:
        raise ConfigError(
            "drawing the results needs matplotlib: pip install 'stoker[plot]'"
        ) from exc
    return Figure, EngFormatter


def _speed(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.1f} M/s"
    if value >= 1e3:
        return f"{value / 1e3:.1f} k/s"
    return f"{value:.0f}/s"


def plot_results(document: dict[str, Any], path: Path) -> Path:
    """Draw a ``stoker bench`` JSON document (format ``stoker-bench/1``) into a PNG at ``path``.

    Returns:
        ``path``, once the file is written.

    Errors:
        ConfigError: matplotlib is not installed, or the document holds no workloads.
    """
    Figure, EngFormatter = _load_matplotlib()
    results = document.get("workloads") or []
    if not results:
        raise ConfigError("the results hold no workloads to draw: run stoker bench first")
    columns = 2 if len(results) > 1 else 1
    rows = math.ceil(len(results) / columns)
    fig = Figure(figsize=(7 * columns, 0.4 + 2.2 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False)
    for ax, workload in zip(axes.flat, results, strict=False):
        loaders = workload["rows"]
        labels = [row["loader"] for row in loaders]
        speeds = [row["samples_per_s"] for row in loaders]
        colours = [_COLOURS.get(row.get("kind", "stoker"), "#495057") for row in loaders]
        positions = list(range(len(loaders)))[::-1]  # the first row on top
        ax.barh(positions, speeds, color=colours)
        ax.set_yticks(positions, labels, fontsize=8)
        for y, row, speed in zip(positions, loaders, speeds, strict=True):
            ratio = row.get("vs_torch") if row.get("kind") == "stoker" else None
            text = _speed(speed) + (f"  {ratio:.2f}x torch" if ratio else "")
            ax.text(speed, y, f" {text}", va="center", fontsize=7)
        workers = workload.get("params", {}).get("num_workers")
        if isinstance(workers, list):
            workers = ", ".join(str(w) for w in workers)
        title = workload["name"] + (f" ({workers} workers)" if workers else "")
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_xlabel("samples/s (median epoch)", fontsize=8)
        ax.set_xlim(0, max(speeds) * 1.45)
        ax.xaxis.set_major_formatter(EngFormatter())
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(results) :]:
        ax.set_visible(False)
    machine = document.get("machine", {})
    fig.suptitle(
        f"stoker bench: {machine.get('cpus_usable', '?')} CPUs, "
        f"{machine.get('processor') or 'unknown CPU'}, torch {machine.get('torch') or '-'}",
        fontsize=10,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=110)
    return path
