"""Peak memory with 4 process workers, stoker against PyTorch: ``python bench/memory.py``.

Two cases, each read for one shuffled epoch (batch 256) by 4 worker processes:

* ``objects``: ~1 GB of in-memory Python records, a list of ``(int, str)`` tuples,
  read with ``sk.from_sequence(records)`` and with ``DataLoader(records)``;
* ``array``: a ~1 GB float32 NumPy array of (1024,) rows, read with
  ``sk.from_arrays(array)`` and with ``DataLoader(array)``.

stoker runs with ``worker_mode="process"`` (its default start method), torch with its
default start method (``fork`` on Linux). Every (case, loader) pair runs in a fresh
Python process, so nothing one leaves behind counts against the next; each imports
stoker, and torch when the run has torch rows, before it builds the data, as a
training job would. While the
epoch runs, a thread samples the total PSS (proportional set size: a page shared by
k processes counts 1/k in each) of that process and all its descendants, workers
and helper processes included, every ``--interval`` seconds; the table shows the
peak. ``baseline`` is the same total after the data is built and before the loader
starts, so ``peak - baseline`` is what loading with workers added.

    $ python bench/memory.py                  # ~1 GB per case, JSON kept in bench/results/
    $ python bench/memory.py --quick          # ~256 MB per case
    $ python bench/memory.py --scale 0.002 --workers 2 --json /tmp/m.json   # a smoke test

Needs psutil (for PSS) and, for the torch rows, torch.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import platform
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
FORMAT = "stoker-bench-memory/1"
CASES = ("objects", "array")
LOADERS = ("stoker", "torch")
FULL_BYTES = 1_000_000_000
QUICK_BYTES = 256_000_000
BATCH_SIZE = 256
SEED = 0
ROW_FLOATS = 1024
# An (int, str) tuple with a 40-character string: the tuple (56 bytes), the int (28),
# the string (89) and the list's pointer (8), about 181 bytes in CPython 3.11.
OBJECT_BYTES = 181
_TEXT = "abcdefghijklmnopqrstuvwxyz0123456789"


# ---------------------------------------------------------------- the measuring child


def _tree_pss(root: Any) -> int:
    """The total PSS of ``root`` and all its descendants, in bytes."""
    import psutil

    total = 0
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for process in processes:
        # A worker may exit between the listing and the reading.
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            total += process.memory_full_info().pss
    return total


class PeakSampler:
    """Samples the process tree's total PSS on a thread until :meth:`stop`; keeps the peak.

    Resources: one daemon thread, ended by :meth:`stop` (which waits for it).
    """

    def __init__(self, interval: float) -> None:
        import psutil

        self._root = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.peak = 0
        self.samples = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="pss-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def sample(self) -> int:
        """Take one sample now (also called from the loop, so short epochs get one)."""
        pss = _tree_pss(self._root)
        with self._lock:
            self.peak = max(self.peak, pss)
            self.samples += 1
        return pss

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def build_objects(target_bytes: int) -> list[tuple[int, str]]:
    """About ``target_bytes`` of ``(i, 40-character str)`` tuples; the content depends on i."""
    count = max(1, target_bytes // OBJECT_BYTES)
    return [(i, f"{i:012d}-{_TEXT[i % 10 :][:27]}".ljust(40, "x")) for i in range(count)]


def build_array(target_bytes: int) -> Any:
    """A float32 array of (1024,) rows, about ``target_bytes``, filled with random numbers."""
    import numpy as np

    rows = max(1, target_bytes // (ROW_FLOATS * 4))
    return np.random.Generator(np.random.PCG64(SEED)).random((rows, ROW_FLOATS), dtype=np.float32)


def make_loader(case: str, loader: str, data: Any, workers: int) -> tuple[Any, str]:
    """The loader under test and the start method its workers use."""
    if loader == "stoker":
        import stoker as sk

        dataset = sk.from_sequence(data) if case == "objects" else sk.from_arrays(data)
        built: Any = sk.DataLoader(
            dataset,
            batch_size=BATCH_SIZE,
            shuffle=True,
            seed=SEED,
            num_workers=workers,
            worker_mode="process",
        )
        return built, "stoker default"
    import torch

    generator = torch.Generator().manual_seed(SEED)
    built = torch.utils.data.DataLoader(
        data, batch_size=BATCH_SIZE, shuffle=True, num_workers=workers, generator=generator
    )
    import multiprocessing

    return built, f"{multiprocessing.get_start_method()} (torch default)"


def measure(
    case: str, loader: str, target_bytes: int, workers: int, interval: float, with_torch: bool
) -> dict[str, Any]:
    """Build the data, then run one epoch while sampling the process tree's PSS.

    stoker is imported first, and torch too when ``with_torch`` (the run compares
    with torch), whichever loader runs, as in a training job: the baseline includes
    both, so the loaders start level.
    """
    import psutil

    import stoker  # noqa: F401

    if with_torch:
        import torch  # noqa: F401
    me = psutil.Process()
    before = me.memory_info().rss
    data = build_objects(target_bytes) if case == "objects" else build_array(target_bytes)
    gc.collect()
    data_bytes = me.memory_info().rss - before
    baseline = _tree_pss(me)
    sampler = PeakSampler(interval)
    sampler.start()
    start = time.perf_counter()
    built, start_method = make_loader(case, loader, data, workers)
    batches = 0
    for batch in built:
        if batches == 0:
            sampler.sample()  # the workers are up: a short epoch still gets a sample
        batches += 1
        del batch
    seconds = time.perf_counter() - start
    sampler.sample()
    sampler.stop()
    result: dict[str, Any] = {
        "case": case,
        "loader": loader,
        "workers": workers,
        "start_method": start_method,
        "records": len(data),
        "data_bytes": data_bytes,
        "baseline_pss": baseline,
        "peak_pss": sampler.peak,
        "added_pss": sampler.peak - baseline,
        "pss_samples": sampler.samples,
        "batches": batches,
        "epoch_s": seconds,
        "torch": _torch_version(),
    }
    return result


def _torch_version() -> str | None:
    torch = sys.modules.get("torch")
    return None if torch is None else str(torch.__version__)


# ---------------------------------------------------------------- the parent


def run_case(
    case: str, loader: str, target_bytes: int, workers: int, interval: float, with_torch: bool
) -> dict[str, Any]:
    """Measure one (case, loader) pair in a fresh Python process."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        case,
        loader,
        "--bytes",
        str(target_bytes),
        "--workers",
        str(workers),
        "--interval",
        str(interval),
        *(["--with-torch"] if with_torch else []),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"measuring {case} / {loader} failed with exit status {done.returncode}:\n"
            f"{done.stderr.strip()}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _gb(value: float) -> str:
    return f"{value / 1e9:.3f}"


def table(results: list[dict[str, Any]]) -> str:
    """The results as an aligned text table, with ``stoker``'s peak as a fraction of torch's."""
    torch_peak = {r["case"]: r["peak_pss"] for r in results if r["loader"] == "torch"}
    columns = (
        "case",
        "loader",
        "workers",
        "records",
        "data GB",
        "baseline GB",
        "peak GB",
        "added GB",
        "peak / torch's",
        "epoch s",
    )
    lines: list[tuple[str, ...]] = [columns]
    for r in results:
        base = torch_peak.get(r["case"])
        lines.append(
            (
                r["case"],
                r["loader"],
                str(r["workers"]),
                f"{r['records']:,}",
                _gb(r["data_bytes"]),
                _gb(r["baseline_pss"]),
                _gb(r["peak_pss"]),
                _gb(r["added_pss"]),
                "-" if not base else f"{r['peak_pss'] / base:.2f}x",
                f"{r['epoch_s']:.2f}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    rendered = [
        "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    ]
    rendered.insert(1, "  ".join("-" * w for w in widths))
    rendered.append(
        "GB: total PSS of the main process and every process under it (1 GB = 1e9 bytes);\n"
        "baseline: after building the data, before the loader; peak: the most while an epoch "
        "ran;\nadded: peak - baseline; data: the data's own resident size"
    )
    return "\n".join(rendered)


def results_path() -> Path:
    """``bench/results/<YYYY-MM-DD>-<host>-memory.json``."""
    host = re.sub(r"[^A-Za-z0-9_.-]+", "-", platform.node()).strip("-") or "host"
    return RESULTS / f"{datetime.date.today().isoformat()}-{host}-memory.json"


def _names(text: str, allowed: Sequence[str]) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {', '.join(unknown)}; choose from {', '.join(allowed)}"
        )
    return names


def _positive(kind: type[float] | type[int]) -> Any:
    def parse(text: str) -> float | int:
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python bench/memory.py",
        description="Peak total PSS of stoker and the PyTorch DataLoader with process workers.",
    )
    parser.add_argument("--quick", action="store_true", help="~256 MB per case instead of ~1 GB")
    parser.add_argument(
        "--scale", type=_positive(float), default=1.0, help="multiply the data size by this"
    )
    parser.add_argument("--workers", type=_positive(int), default=4, help="worker processes (4)")
    parser.add_argument(
        "--cases",
        type=lambda text: _names(text, CASES),
        default=list(CASES),
        help=f"comma-separated, out of {','.join(CASES)}",
    )
    parser.add_argument(
        "--loaders",
        type=lambda text: _names(text, LOADERS),
        default=list(LOADERS),
        help=f"comma-separated, out of {','.join(LOADERS)}",
    )
    parser.add_argument(
        "--interval", type=_positive(float), default=0.02, help="seconds between PSS samples"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="where to write the results")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "LOADER"), help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--with-torch", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.child:
        case, loader = args.child
        result = measure(case, loader, args.bytes, args.workers, args.interval, args.with_torch)
        print(json.dumps(result))
        return 0
    from stoker._bench.harness import write_json
    from stoker._bench.machine import machine_info

    target = max(1, int((QUICK_BYTES if args.quick else FULL_BYTES) * args.scale))
    machine = machine_info(None)  # before the run: the revision of the code the children use
    results = []
    with_torch = "torch" in args.loaders
    started = time.perf_counter()
    for case in args.cases:
        for loader in args.loaders:
            print(f"  {case} / {loader}: measuring ...", file=sys.stderr, flush=True)
            results.append(run_case(case, loader, target, args.workers, args.interval, with_torch))
    elapsed = time.perf_counter() - started
    machine["torch"] = next((r["torch"] for r in results if r["torch"]), None)
    print(
        f"stoker {machine['stoker']} | torch {machine['torch'] or '-'} | "
        f"python {machine['python']} | {machine['cpus_usable']} CPUs, {machine['processor']} | "
        f"{machine['memory_gb']} GB | {args.workers} workers, batch {BATCH_SIZE}, shuffled"
    )
    print(table(results))
    path = args.json or results_path()
    document = {
        "format": FORMAT,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "settings": {
            "target_bytes": target,
            "quick": args.quick,
            "scale": args.scale,
            "workers": args.workers,
            "interval_s": args.interval,
            "batch_size": BATCH_SIZE,
        },
        "results": results,
        "total_seconds": elapsed,
    }
    write_json(path, document)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
