"""Every table source shuffled with nothing tuned: ``python bench/table_sources_shuffled.py``.

Writes 1,000,000 rows (an int64, a float64, a list of 16-127 int32 tokens and a
~30-character string) once as an Arrow IPC file, Parquet, Lance, SQLite, JSON Lines
and CSV under ``/tmp/stoker-table-sources`` (``ROWS=`` to change the count), then
reads each with its builder and ``shuffle=True``, nothing tuned, batch 32, 0 workers:
rows/s over 300 batches after 20 (wall clock, then process CPU). Name sources on the
command line to run only those (``from_hf from_lance``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pds
import pyarrow.feather as feather
import pyarrow.parquet as pq

import stoker as sk

N = int(os.environ.get("ROWS", 1_000_000))
ROOT = f"/tmp/stoker-table-sources/{N}"


def _table() -> Any:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(N)
    lengths = rng.integers(16, 128, N)
    offsets = np.zeros(N + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(rng.integers(0, 50000, int(offsets[-1]), dtype=np.int32))
    tokens = pa.ListArray.from_arrays(pa.array(offsets), values)
    text = pa.array([f"record number {i} of the table" for i in range(N)])
    return pa.table({"id": np.arange(N), "a": a, "tokens": tokens, "text": text})


def _write() -> None:
    if os.path.exists(f"{ROOT}/done"):
        return
    import lance

    os.makedirs(f"{ROOT}/ipc", exist_ok=True)
    table = _table()
    feather.write_feather(table, f"{ROOT}/ipc/part-0.arrow")
    pq.write_table(table, f"{ROOT}/t.parquet")
    lance.write_dataset(table, f"{ROOT}/t.lance")
    rows = list(zip(*(table[c].to_pylist() for c in ("id", "a", "text")), strict=True))
    with sqlite3.connect(f"{ROOT}/t.db") as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a REAL, text TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    conn.close()
    with open(f"{ROOT}/t.jsonl", "w") as f:
        f.writelines(json.dumps({"id": i, "a": a, "text": x}) + "\n" for i, a, x in rows)
    with open(f"{ROOT}/t.csv", "w") as f:
        f.write("id,a,text\n")
        f.writelines(f"{i},{a},{x}\n" for i, a, x in rows)
    open(f"{ROOT}/done", "w").close()


def _hf() -> Any:
    import datasets

    hf = datasets.Dataset.from_parquet(f"{ROOT}/t.parquet", cache_dir=f"{ROOT}/hf")
    return sk.from_hf(hf, columns=["id", "a", "text"])


def _sources() -> Iterator[tuple[str, Callable[[], Any]]]:
    columns = ["id", "a", "text"]
    ipc = f"{ROOT}/ipc"
    yield "from_arrow(IPC dataset)", lambda: sk.from_arrow(pds.dataset(ipc, format="ipc"), columns)
    yield "from_hf", _hf
    yield "from_lance", lambda: sk.from_lance(f"{ROOT}/t.lance", columns=columns)
    yield "from_sqlite", lambda: sk.from_sqlite(f"{ROOT}/t.db", "t")
    yield "from_jsonl", lambda: sk.from_jsonl(f"{ROOT}/t.jsonl")
    yield "from_csv", lambda: sk.from_csv(f"{ROOT}/t.csv")


def main(only: list[str]) -> None:
    _write()
    for name, make in _sources():
        if only and not any(o in name for o in only):
            continue
        it = iter(sk.DataLoader(make(), batch_size=32, shuffle=True, seed=0))
        for _ in range(20):
            next(it)
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(300):
            next(it)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(f"{name:26s} {9600 / wall:10,.0f} rows/s (CPU: {9600 / cpu:10,.0f})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
