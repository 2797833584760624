"""MkDocs hook: the Benchmarks page's tables, built from ``bench/results/*.json`` at build time.

``stoker bench --json`` and ``python bench/run.py`` write one JSON document per run
(format ``stoker-bench/1``). Files named ``<series>-runN.json`` are runs of one series:
the same workloads on the same machine. For each series this hook writes the machine,
the number of runs and, per workload, a table with each loader's median samples/s
over the runs and its ratios against PyTorch and bare NumPy. Ratios are taken within
each run (both loaders timed in the same process, minutes apart at most) and then
their median over runs is shown, with the range in brackets: a noisy machine moves
both loaders of a run together, so same-run ratios are steadier than ratios of medians.

The page ``benchmarks.md`` holds the prose; the line ``<!-- bench-tables -->`` in it
is replaced by the tables. Run this file directly to print them:
``python docs_hooks/bench_page.py bench/results``.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

MARKER = "<!-- bench-tables -->"
FORMAT = "stoker-bench/1"
_RUN = re.compile(r"^(?P<series>.+?)(?:-run(?P<run>\d+))?$")
_RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"


def load_series(paths: Iterable[Path]) -> dict[str, list[dict[str, Any]]]:
    """Bench documents grouped by series name (the file name without ``-runN``), in order.

    Files in other formats (the memory and padding scripts write their own) are skipped.
    """
    series: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for path in sorted(paths):
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("format") != FORMAT:
            continue
        match = _RUN.fullmatch(path.stem)
        name, run = (match["series"], int(match["run"] or 1)) if match else (path.stem, 1)
        series.setdefault(name, []).append((run, document))
    return {
        name: [doc for _, doc in sorted(runs, key=lambda r: r[0])] for name, runs in series.items()
    }


def _number(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:,.2f} M"
    return f"{value:,.0f}"


def _ratio(values: Sequence[float]) -> str:
    if not values:
        return ""
    middle = f"**{statistics.median(values):.2f}x**"
    if len(values) == 1:
        return middle
    return f"{middle} [{min(values):.2f}, {max(values):.2f}]"


def _machine(document: dict[str, Any]) -> str:
    m = document.get("machine", {})
    torch = m.get("torch") or "not installed"
    return (
        f"{m.get('cpus_usable', '?')} CPUs ({m.get('processor') or 'unknown processor'}), "
        f"Python {m.get('python')}, NumPy {m.get('numpy')}, torch {torch}, "
        f"stoker {m.get('stoker')}"
    )


def _workload_table(name: str, runs: list[dict[str, Any]]) -> list[str]:
    """One Markdown table for workload ``name`` over the runs that have it."""
    present = [w for doc in runs for w in doc["workloads"] if w["name"] == name]
    summary = present[-1].get("summary", "")
    loaders: dict[str, list[dict[str, Any]]] = {}
    for workload in present:
        for row in workload["rows"]:
            loaders.setdefault(row["loader"], []).append(row)
    lines = [
        f"#### `{name}`",
        "",
        f"{summary} ({len(present)} run{'s' if len(present) != 1 else ''}).",
        "",
        "| loader | samples/s (median) | range over runs | vs PyTorch, same run | "
        "vs bare NumPy, same run |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for loader, rows in loaders.items():
        speeds = [row["samples_per_s"] for row in rows]
        spread = f"{_number(min(speeds))} - {_number(max(speeds))}" if len(rows) > 1 else ""
        vs_torch = [row["vs_torch"] for row in rows if row.get("vs_torch") is not None]
        vs_bare = [row["vs_bare"] for row in rows if row.get("vs_bare") is not None]
        mode = rows[-1].get("worker_mode")
        label = f"{loader} ({mode})" if mode and mode not in loader else loader
        lines.append(
            f"| {label} | {_number(statistics.median(speeds))} | {spread} | "
            f"{_ratio(vs_torch)} | {_ratio(vs_bare)} |"
        )
    return [*lines, ""]


def render(paths: Iterable[Path]) -> str:
    """The Markdown for every series of bench results in ``paths``."""
    out: list[str] = []
    for series, runs in load_series(paths).items():
        created = sorted(doc.get("created", "")[:10] for doc in runs)
        repeats = {doc.get("settings", {}).get("repeats") for doc in runs}
        per_run = ", ".join(str(r) for r in sorted(repeats, key=str))
        out += [
            f"### {series}",
            "",
            f"*Machine:* {_machine(runs[-1])}. *Runs:* {len(runs)} "
            f"({created[0]}{' to ' + created[-1] if created[-1] != created[0] else ''}), "
            f"each the median of {per_run} epochs per loader. *Files:* "
            f"`bench/results/{series}{'-run*' if len(runs) > 1 else ''}.json`.",
            "",
        ]
        names = list(dict.fromkeys(w["name"] for doc in runs for w in doc["workloads"]))
        for name in names:
            out += _workload_table(name, runs)
    if not out:
        return "No `stoker bench` results were found in `bench/results/`.\n"
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: replace the marker on the Benchmarks page with the tables."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render(_RESULTS.glob("*.json")))


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else _RESULTS
    print(render(folder.glob("*.json")))
