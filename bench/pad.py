"""Padding speed, ``sk.pad_collate`` against a hand-written NumPy pad: ``python bench/pad.py``.

Both sides pad the same batch of ``--batch`` int32 token sequences (lengths drawn
uniformly from 16..1024, or from ``--lengths LO,HI``) to the longest in the batch:

* ``sk.pad_collate``: ``sk.pad_collate(records)`` over dict records
  ``{"tokens": np.ndarray}`` (the records a source hands a loader);
* ``sk.pad_collate (lists)``: the same records with Python lists of ints;
* ``hand-written``: ``np.concatenate`` of the rows, then ``out[np.arange(L) <
  lengths[:, None]] = flat`` into an ``np.full`` buffer: the four-line NumPy pad.

Each row is timed ``--calls`` times per run, over ``--repeats`` runs; the table shows
the median time per call (µs) of the runs and the ratio to the hand-written pad. The
results, with the machine, go to ``bench/results/<date>-pad.json`` (or ``--json``).

    $ python bench/pad.py
    $ python bench/pad.py --batch 32 --lengths 16,512 --repeats 9
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk

RESULTS = Path(__file__).resolve().parent / "results"
FORMAT = "stoker-bench-pad/1"


def make_batch(batch: int, lo: int, hi: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(lo, hi + 1, size=batch)
    return [{"tokens": rng.integers(0, 50_000, size=n, dtype=np.int32)} for n in lengths]


def hand_written(records: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    rows = [r["tokens"] for r in records]
    lengths = np.array([len(r) for r in rows])
    width = int(lengths.max())
    out = np.full((len(rows), width), 0, dtype=rows[0].dtype)
    out[np.arange(width) < lengths[:, None]] = np.concatenate(rows)
    return {"tokens": out}


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    fn()  # warm up
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lengths", default="16,1024", help="LO,HI token counts")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    lo, hi = (int(x) for x in args.lengths.split(","))

    records = make_batch(args.batch, lo, hi)
    as_lists = [{"tokens": r["tokens"].tolist()} for r in records]
    expected = hand_written(records)["tokens"]
    for got in (sk.pad_collate(records)["tokens"], sk.pad_collate(as_lists)["tokens"]):
        if not np.array_equal(got, expected):
            print("FAIL: sk.pad_collate and the hand-written pad differ")
            return 1

    rows: dict[str, Callable[[], Any]] = {
        "hand-written": lambda: hand_written(records),
        "sk.pad_collate": lambda: sk.pad_collate(records),
        "sk.pad_collate (lists)": lambda: sk.pad_collate(as_lists),
    }
    runs: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeats):
        for name, fn in rows.items():  # interleaved: drift hits every row alike
            runs[name].append(per_call_us(fn, args.calls))
    medians = {name: statistics.median(times) for name, times in runs.items()}
    base = medians["hand-written"]

    print(
        f"pad a batch of {args.batch} int32 sequences, lengths {lo}..{hi} "
        f"(padded to {expected.shape[1]}); median of {args.repeats} runs "
        f"of {args.calls} calls"
    )
    print(f"{'row':<24}{'µs / call':>12}{'x hand-written':>16}")
    for name, median in medians.items():
        print(f"{name:<24}{median:>12.1f}{median / base:>16.2f}")

    path = args.json or RESULTS / f"{datetime.date.today().isoformat()}-pad.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "format": FORMAT,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "numpy": np.__version__,
        },
        "batch": args.batch,
        "lengths": [lo, hi],
        "width": int(expected.shape[1]),
        "calls": args.calls,
        "repeats": args.repeats,
        "rows": {
            name: {
                "median_us": medians[name],
                "runs_us": runs[name],
                "vs_hand_written": medians[name] / base,
            }
            for name in rows
        },
    }
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
