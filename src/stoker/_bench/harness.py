"""Runs the workloads: verify every loader, time whole epochs, collect the results.

Each (workload, loader) pair is timed over one full epoch, from ``iter(loader)`` to
exhaustion, ``repeats`` times; the loaders take turns within a repeat and the order
flips every repeat, so slow moments of the machine spread over all of them. The loop
body only counts samples. Every run also gives the time to the first batch: from
building the fresh loader to holding its first batch, which is what a training job
waits before its first step. Workloads with ``warm_epoch`` then time a second epoch
of the same loader, the cost of every later epoch of a training job. Verification is
a separate, untimed pass that comes first (it also brings the data into the page
cache for every loader alike).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from . import report
from .base import BenchContext, Kind, Prepared, Runner
from .machine import machine_info
from .results import Row, TargetResult, WorkloadResult
from .verify import Check, verify_runner
from .workloads import available

__all__ = [
    "TORCH_MISSING",
    "EpochTiming",
    "Row",
    "Settings",
    "TargetResult",
    "WorkloadResult",
    "default_cache_dir",
    "load_torch",
    "run",
]

TORCH_MISSING = "torch not installed: pip install 'stoker[torch]' to compare"
JSON_FORMAT = "stoker-bench/1"


@dataclass(frozen=True)
class Settings:
    """What ``stoker bench`` was asked to do."""

    repeats: int
    quick: bool
    workloads: tuple[str, ...]
    loaders: frozenset[Kind]
    cache_dir: Path
    json_path: Path | None = None
    scale: float = 1.0
    plot_path: Path | None = None


def default_cache_dir() -> Path:
    """``$STOKER_CACHE/bench``, else ``stoker/bench`` under ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    root = os.environ.get("STOKER_CACHE")
    if root:
        return Path(root).expanduser() / "bench"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "stoker" / "bench"


def load_torch() -> Any:
    """The ``torch`` module, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


@dataclass(frozen=True)
class EpochTiming:
    """One timed run of one loader (seconds, and the samples it delivered)."""

    build: float
    first_batch: float
    epoch: float
    samples: int
    warm: float | None = None
    warm_samples: int | None = None


def time_epoch(runner: Runner, warm: bool = False) -> EpochTiming:
    """Build a fresh loader and iterate it to exhaustion (twice when ``warm``).

    Only the iteration is the epoch time; building (which may copy or index the data
    once) is reported apart, because a training run pays it once, not every epoch.
    The time to the first batch is building plus ``iter()`` and the first ``next()``
    (the garbage collection between the two is left out of both). With ``warm`` a
    second ``iter()`` of the same loader is timed to exhaustion too.
    """
    gc.collect()
    start = time.perf_counter()
    loader = runner.make()
    built = time.perf_counter() - start
    gc.collect()
    samples = 0
    start = time.perf_counter()
    batches = iter(loader)
    first = next(batches, None)
    first_seconds = time.perf_counter() - start
    if first is not None:
        samples += len(first)
        del first  # a held batch keeps its buffer from being reused
    for batch in batches:
        samples += len(batch)
    epoch = time.perf_counter() - start
    if not warm:
        return EpochTiming(built, built + first_seconds, epoch, samples)
    del batches
    gc.collect()
    warm_samples = 0
    start = time.perf_counter()
    for batch in loader:
        warm_samples += len(batch)
    warm_seconds = time.perf_counter() - start
    return EpochTiming(built, built + first_seconds, epoch, samples, warm_seconds, warm_samples)


def run_workload(
    name: str, prepared: Prepared, repeats: int, log: Callable[[str], None]
) -> tuple[list[Row], list[Check], list[str]]:
    """Verify, then time, every runner of one prepared workload."""
    failures: list[str] = []
    checks: list[Check] = []
    for runner in prepared.runners:
        gc.collect()  # the last runner's loaders end before this one starts
        check = verify_runner(prepared, runner)
        checks.append(check)
        log(f"{name}: verified {runner.label}: {'ok' if check.ok else 'FAIL ' + check.detail}")
        if not check.ok:
            failures.append(
                f"{name} / {runner.label}: batches differ from the reference: {check.detail}"
            )
    rows = [
        Row(
            r.label,
            r.kind,
            prepared.samples if r.samples is None else r.samples,
            prepared.record_bytes,
            limit=r.limit,
            worker_mode=check.worker_mode,
            show_mode=r.show_mode,
            versus=r.versus,
        )
        for r, check in zip(prepared.runners, checks, strict=True)
    ]
    pairs = list(zip(prepared.runners, rows, strict=True))
    for repeat in range(repeats):
        for runner, row in pairs if repeat % 2 == 0 else reversed(pairs):
            timing = time_epoch(runner, prepared.warm_epoch)
            row.seconds.append(timing.epoch)
            row.build_seconds.append(timing.build)
            row.first_batch_seconds.append(timing.first_batch)
            warm = ""
            if timing.warm is not None:
                row.warm_seconds.append(timing.warm)
                warm = f", second epoch {timing.warm:.3f} s"
            log(
                f"{name}: {runner.label} run {repeat + 1}/{repeats}: {timing.epoch:.3f} s "
                f"(first batch {timing.first_batch:.3f} s{warm})"
            )
            for delivered in (timing.samples, timing.warm_samples):
                if delivered is not None and delivered != row.samples:
                    failures.append(
                        f"{name} / {runner.label}: a timed epoch delivered {delivered} "
                        f"samples, expected {row.samples}"
                    )
    return rows, checks, failures


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """Leave the objects that exist now (torch's modules, ...) out of garbage collections.

    Every timed run starts with ``gc.collect()``, so that the previous loader ends
    before the next one starts; with torch imported a full collection takes ~0.1 s,
    which the freeze brings down to what the workloads themselves allocate.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run(settings: Settings, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the benchmark, print the table to ``out``; 1 when a verification failed, else 0."""
    out = out or sys.stdout
    err = err or sys.stderr

    def log(message: str) -> None:
        print(f"  {message}", file=err, flush=True)

    torch = load_torch() if "torch" in settings.loaders else None
    if "torch" in settings.loaders and torch is None:
        print(TORCH_MISSING, file=out, flush=True)
    ctx = BenchContext(
        settings.cache_dir, settings.quick, settings.scale, settings.loaders, torch, log
    )
    machine = machine_info(torch)  # before the run: the revision of the code it imported
    registry = available()
    results: list[WorkloadResult] = []
    started = time.perf_counter()
    with _frozen_heap():
        for name in settings.workloads:
            workload = registry[name]
            log(f"{name}: preparing")
            prepared = workload.prepare(ctx)
            summary = prepared.summary or workload.summary
            log(f"{name}: {summary}")
            rows, checks, failures = run_workload(name, prepared, settings.repeats, log)
            results.append(
                WorkloadResult(
                    name,
                    summary,
                    dict(prepared.params),
                    rows,
                    checks,
                    failures,
                    prepared.targets,
                )
            )
    elapsed = time.perf_counter() - started
    print(report.header(machine, settings.repeats), file=out)
    print(report.workloads(results), file=out)
    print(report.table(results), file=out)
    notes = report.notes(results)
    if notes:
        print(notes, file=out)
    failures = [failure for result in results for failure in result.failures]
    for failure in failures:
        print(f"FAIL: {failure}", file=out)
    checked = sum(len(result.checks) for result in results)
    if not failures:
        print(f"verified: {checked} loaders produced the expected batches", file=out)
    summary = report.target_summary(results)
    if summary:
        print(summary, file=out)
    print(f"total {elapsed:.1f} s", file=out, flush=True)
    document = to_json(settings, machine, results, elapsed)
    if settings.json_path is not None:
        write_json(settings.json_path, document)
        print(f"wrote {settings.json_path}", file=out, flush=True)
    if settings.plot_path is not None:
        from .plot import plot_results

        print(f"wrote {plot_results(document, settings.plot_path)}", file=out, flush=True)
    return 1 if failures else 0


def to_json(
    settings: Settings, machine: dict[str, Any], results: list[WorkloadResult], elapsed: float
) -> dict[str, Any]:
    """The JSON report: machine, settings, per-run seconds, medians, ratios, verification."""
    workloads = []
    for result in results:
        rows = [
            {
                "loader": row.loader,
                "kind": row.kind,
                "samples": row.samples,
                "record_bytes": row.record_bytes,
                "seconds": row.seconds,
                "median_s": row.median,
                "min_s": min(row.seconds),
                "max_s": max(row.seconds),
                "build_seconds": row.build_seconds,
                "build_median_s": statistics.median(row.build_seconds),
                "first_batch_seconds": row.first_batch_seconds,
                "first_batch_median_s": row.first_batch_median,
                "samples_per_s": row.samples_per_s,
                "gb_per_s": row.gb_per_s,
                "vs_torch": result.ratio(row, "torch"),
                "vs_bare": result.ratio(row, "bare"),
                "first_batch_vs_torch": result.first_batch_ratio(row, "torch"),
                "warm_seconds": row.warm_seconds,
                "warm_median_s": row.warm_median,
                "warm_samples_per_s": row.warm_samples_per_s,
                "warm_vs_torch": result.warm_ratio(row, "torch"),
                "limit_samples_per_s": row.limit,
                "of_limit": row.of_limit,
                "worker_mode": row.worker_mode,
            }
            for row in result.rows
        ]
        verification = {
            "ok": not result.failures,
            "checks": [asdict(check) for check in result.checks],
            "failures": result.failures,
        }
        workloads.append(
            {
                "name": result.name,
                "summary": result.summary,
                "params": result.params,
                "rows": rows,
                "targets": [asdict(target) for target in result.target_results()],
                "verification": verification,
            }
        )
    return {
        "format": JSON_FORMAT,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "settings": {
            "repeats": settings.repeats,
            "quick": settings.quick,
            "scale": settings.scale,
            "workloads": list(settings.workloads),
            "loaders": sorted(settings.loaders),
            "cache_dir": str(settings.cache_dir),
        },
        "workloads": workloads,
        "verification_ok": all(not result.failures for result in results),
        "total_seconds": elapsed,
    }


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Write ``document`` to ``path`` whole or not at all (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
