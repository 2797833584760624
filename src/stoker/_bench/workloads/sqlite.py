"""``sqlite``: 1,000,000 rows of an SQLite table (4 numbers + a text), shuffled, batch 256.

The table is ``items(id INTEGER PRIMARY KEY, a REAL, b REAL, c INTEGER, text TEXT)``
with ids 1 .. n; record ``i`` is the row with rowid ``i + 1``. Every loader reads
the epoch-0 order of ``ds.shuffle_sampler(seed=0)`` (blocks of 4,096 consecutive
rows in a random order, rows shuffled within windows of 4 blocks), with 0 and 2
workers:

* ``stoker``: ``sk.from_sqlite(path, "items")`` with that sampler: each block a batch
  touches is read whole by one range query, converted once to NumPy columns and
  cached, and the batch gathered from the blocks, on a read-only connection per
  worker;
* ``torch``: the PyTorch DataLoader over :class:`RowQueries`, a map-style dataset that
  runs ``SELECT ... WHERE rowid = ?`` for every row, on a read-only connection opened
  lazily in each worker. Its collate gives tensors for the numbers and a list of
  strings for the text.

Each stoker row is compared with the torch row of the same worker count. Every batch
is checked against a reference read with ``sqlite3`` directly: the numbers as float64
side by side with the CRC-32 of every text. The database (~70 MB) is written once into
the cache folder; ``--quick`` uses 200,000 rows.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, Target
from ..verify import to_numpy
from . import workload
from ._common import OrderSampler, index_batches
from ._tables import AsArrays, write_once

ROWS = 1_000_000
QUICK_ROWS = 200_000
BATCH_SIZE = 256
WORKERS = (0, 2)
SEED = 0
NUMBERS = ["id", "a", "b", "c"]
COLUMNS = [*NUMBERS, "text"]
TEXT_LEN = (8, 48)
RECORD_BYTES = 8 * len(NUMBERS) + sum(TEXT_LEN) // 2
_CHUNK_ROWS = 50_000
_LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz      ", dtype=np.uint8)


def _chunk(start: int, rows: int) -> list[tuple[int, float, float, int, str]]:
    """Rows ``start + 1 .. start + rows``, drawn from ``PCG64([SEED, chunk number])``."""
    rng = np.random.Generator(np.random.PCG64([SEED, start // _CHUNK_ROWS]))
    a = rng.standard_normal(rows).tolist()
    b = rng.random(rows).tolist()
    c = rng.integers(0, 1_000_000, size=rows).tolist()
    lengths = rng.integers(TEXT_LEN[0], TEXT_LEN[1] + 1, size=rows)
    letters = _LETTERS[rng.integers(0, len(_LETTERS), size=int(lengths.sum()))].tobytes()
    ends = np.cumsum(lengths).tolist()
    texts = [letters[e - n : e].decode() for e, n in zip(ends, lengths.tolist(), strict=True)]
    ids = range(start + 1, start + rows + 1)
    return list(zip(ids, a, b, c, texts, strict=True))


def _write_db(n: int, path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, a REAL, b REAL, c INTEGER, text TEXT)"
        )
        for start in range(0, n, _CHUNK_ROWS):
            rows = _chunk(start, min(_CHUNK_ROWS, n - start))
            conn.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?)", rows)
        conn.commit()
    finally:
        conn.close()


def database(cache_dir: Path, n: int, log: Any) -> Path:
    """The SQLite file of an ``n``-row ``items`` table, written first when missing."""
    path = cache_dir / f"items-{n}.sqlite"
    return write_once(path, lambda tmp: _write_db(n, tmp), f"{n:,} SQLite rows", log)


class RowQueries:
    """A map-style dataset for torch: one ``SELECT ... WHERE rowid = ?`` per record.

    The connection (read-only) is opened on first use in each worker and left out of
    the pickle.
    """

    def __init__(self, path: Path, rows: int) -> None:
        self._uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
        self._rows = rows
        self._conn: sqlite3.Connection | None = None

    def __len__(self) -> int:
        return self._rows

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_conn": None}

    def __getitem__(self, index: int) -> dict[str, Any]:
        if self._conn is None:
            self._conn = sqlite3.connect(self._uri, uri=True)
        query = "SELECT id, a, b, c, text FROM items WHERE rowid = ?"
        row = self._conn.execute(query, (index + 1,)).fetchone()
        return dict(zip(COLUMNS, row, strict=True))


def to_array(batch: Any) -> np.ndarray:
    """A batch as float64 columns: the numbers, then the CRC-32 of every text."""
    numbers = [to_numpy(batch[name]).astype(np.float64) for name in NUMBERS]
    crc = np.array([zlib.crc32(t.encode()) for t in batch["text"]], dtype=np.float64)
    return np.column_stack([*numbers, crc])


def count_rows(ctx: BenchContext) -> int:
    """How many rows the table holds under the context's quick and scale options."""
    return max(2 * BATCH_SIZE, int((QUICK_ROWS if ctx.quick else ROWS) * ctx.scale))


@workload(
    "sqlite",
    "1M-row SQLite table (200k with --quick; 4 numbers + text), block shuffle, batch 256, "
    "0 and 2 workers, "
    "vs torch with one query per row",
    default=False,
)
def prepare(ctx: BenchContext) -> Prepared:
    """Write (or reuse) the database; read it shuffled with one query per batch or per row."""
    n = count_rows(ctx)
    path = database(ctx.cache_dir, n, ctx.log)
    sampler = sk.from_sqlite(path, "items").shuffle_sampler(seed=SEED)
    order = sampler.cursor(epoch=0).take(n)
    runners: list[Runner] = []
    torch = ctx.torch
    for workers in WORKERS:
        if ctx.wants("stoker"):

            def stoker_loader(workers: int = workers) -> Any:
                loader = sk.DataLoader(
                    sk.from_sqlite(path, "items"),
                    batch_size=BATCH_SIZE,
                    sampler=sampler,
                    num_workers=workers,
                )
                return AsArrays(loader, "id", to_array)

            runners.append(
                Runner(
                    f"stoker x{workers}",
                    "stoker",
                    stoker_loader,
                    versus=f"torch x{workers}",
                    show_mode=workers > 0,
                )
            )
        if ctx.wants("torch"):
            records = RowQueries(path, n)

            def torch_loader(workers: int = workers, records: RowQueries = records) -> Any:
                loader = torch.utils.data.DataLoader(
                    records, batch_size=BATCH_SIZE, sampler=OrderSampler(order), num_workers=workers
                )
                return AsArrays(loader, "id", to_array)

            runners.append(Runner(f"torch x{workers}", "torch", torch_loader))

    table: list[tuple[np.ndarray, list[str]]] = []

    def reference() -> Iterator[np.ndarray]:
        if not table:
            with sqlite3.connect(f"file:{urllib.parse.quote(str(path))}?mode=ro", uri=True) as c:
                rows = c.execute("SELECT id, a, b, c, text FROM items ORDER BY rowid").fetchall()
            c.close()
            numbers = np.array([r[:4] for r in rows], dtype=np.float64)
            table.append((numbers, [r[4] for r in rows]))
        numbers, texts = table[0]
        for idx in index_batches(order, BATCH_SIZE):
            crc = [zlib.crc32(texts[i].encode()) for i in idx.tolist()]
            yield np.column_stack([numbers[idx], np.array(crc, dtype=np.float64)])

    return Prepared(
        summary=(
            f"{n:,}-row SQLite table (4 numbers + text), block shuffle (blocks of "
            f"{sampler.chunk_size:,}, window {sampler.window:,}), batch 256, 0 and 2 "
            "workers, vs torch with one query per row"
        ),
        samples=n,
        record_bytes=RECORD_BYTES,
        runners=tuple(runners),
        reference=reference,
        params={
            "records": n,
            "batch_size": BATCH_SIZE,
            "num_workers": list(WORKERS),
            "table": "items(id INTEGER PRIMARY KEY, a REAL, b REAL, c INTEGER, text TEXT)",
            "file": str(path),
            "file_bytes": path.stat().st_size,
            "seed": SEED,
            "shuffle": f"shuffle_sampler: chunk {sampler.chunk_size}, window {sampler.window}",
        },
        targets=tuple(Target(f"stoker x{w}", "speed", 5.0) for w in WORKERS),
    )
