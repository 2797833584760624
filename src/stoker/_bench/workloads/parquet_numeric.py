"""``parquet_numeric``: 1.07 GB of 16 float32 columns + an int64 label in Parquet, shuffled.

14.9 million rows (1.49 GB on disk, as pyarrow writes them by default) in row
groups of 262,144 rows (~19 MB each), batch 1024. The file is larger than stoker's
decode cache (256 MiB), so every loader reads the epoch order of stoker's
row-group-aligned ``ds.shuffle_sampler(seed=0)``: row groups in a random order, rows
shuffled within windows of 4 row groups.

Rows:

* ``stoker x0`` and ``stoker x2``: ``sk.from_parquet(path, cache_dir=<cache
  folder>/parquet-decoded)`` with that sampler (``worker_mode="auto"`` for 2
  workers); a batch is a dict of 17 NumPy columns. Its row groups are decoded into
  that folder once, before timing (``ds.write_cache()``, ~1.1 GB, kept between
  runs), with the file's rows end to end (``rows.bin``, ~1.1 GB more), so every
  timed epoch gathers its batches from that mapping instead of decoding.
* ``torch x2 per-row``: the PyTorch DataLoader, 2 worker processes, over
  :class:`PerRowParquet`, a map-style dataset that reads one row per
  ``__getitem__`` the way such readers are usually written (the file opened once
  per worker, the row's row group read with ``ParquetFile.read_row_group``, the row
  sliced out and turned into a dict with ``to_pylist``), made reasonable by keeping
  the last 8 decoded row groups per worker, so that with the row-group-aligned
  order it decodes each row group about once: what is left is the per-row cost. It
  reads the same order, but only its first 131,072 rows (a whole epoch would take
  about 10 minutes): its samples/s is that part's.

The limit: the time pyarrow takes to read the whole file once (``pq.read_table``, the
sequential decode limit) is measured in the same run, while the workload is
prepared (the median of 5 reads, the page cache warm), and every stoker row's
samples/s is reported as a fraction of rows / that time (target: at least 1/2).

Every batch is compared with a reference gathered with pyarrow from the whole table
(as float64 columns side by side: torch's collate makes float64 tensors of the
Python floats that ``to_pylist`` gives, equal to the float32 values). The file is
written once into the cache folder; ``--quick`` uses a ~0.27 GB file.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, Target, gigabytes
from . import workload
from ._common import OrderSampler, index_batches
from ._tables import (
    AsArrays,
    columns_array,
    decoded_parquet,
    module,
    parquet_shuffle,
    write_once,
)

FEATURES = 16
COLUMNS = [f"f{i:02d}" for i in range(FEATURES)] + ["label"]
ROW_BYTES = FEATURES * 4 + 8
FULL_BYTES = 1_073_741_824
QUICK_BYTES = 268_435_456
GROUP_ROWS = 262_144
BATCH_SIZE = 1024
WORKERS = 2
CACHED_GROUPS = 8
TORCH_ROWS = 131_072
READS = 5
SEED = 0
EXACT_BATCHES = 4
_CHUNK_ROWS = 65_536


def _write_numeric(n: int, path: Path) -> None:
    pa, pq = module("pyarrow"), module("pyarrow.parquet")
    fields = [(name, pa.float32()) for name in COLUMNS[:-1]] + [("label", pa.int64())]
    schema = pa.schema(fields)
    with pq.ParquetWriter(path, schema, compression="snappy") as writer:
        for group, start in enumerate(range(0, n, GROUP_ROWS)):
            rows = min(GROUP_ROWS, n - start)
            rng = np.random.Generator(np.random.PCG64([SEED, group]))
            features = rng.standard_normal((FEATURES, rows), dtype=np.float32)
            label = rng.integers(0, 1000, size=rows, dtype=np.int64)
            arrays = [pa.array(column) for column in features] + [pa.array(label)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))


def numeric_file(cache_dir: Path, n: int, log: Any) -> Path:
    """The Parquet file of ``n`` rows, written first when missing.

    Row group ``g`` (``GROUP_ROWS`` rows) draws its 16 float32 columns (standard
    normal), then its labels (0-999), from ``PCG64([SEED, g])``.
    """
    path = cache_dir / f"numeric-16xf32-i64-{n}-g{GROUP_ROWS}.parquet"
    what = f"{n:,} rows of 16 float32 columns and a label"
    return write_once(path, functools.partial(_write_numeric, n), what, log)


class PerRowParquet:
    """A map-style dataset for torch that reads one row per ``__getitem__`` with pyarrow.

    The file is opened on first use in each worker (the handle is not pickled); the
    last ``cached_groups`` decoded row groups are kept. A row is
    ``table.slice(i, 1).to_pylist()[0]``: a dict of Python floats and an int.
    """

    def __init__(
        self, path: Path, group_rows: list[int], cached_groups: int = CACHED_GROUPS
    ) -> None:
        self._path = str(path)
        self._cached_groups = cached_groups
        self._starts = np.concatenate([[0], np.cumsum(group_rows)])
        self._file: Any = None
        self._groups: dict[int, Any] = {}

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_file": None, "_groups": {}}

    def _group(self, group: int) -> Any:
        table = self._groups.pop(group, None)
        if table is None:
            if self._file is None:
                self._file = module("pyarrow.parquet").ParquetFile(self._path)
            table = self._file.read_row_group(group)
            if len(self._groups) >= self._cached_groups:
                del self._groups[next(iter(self._groups))]
        self._groups[group] = table  # the most recently used is last
        return table

    def __getitem__(self, index: int) -> dict[str, Any]:
        group = int(np.searchsorted(self._starts, index, side="right")) - 1
        row: dict[str, Any] = (
            self._group(group).slice(index - int(self._starts[group]), 1).to_pylist()[0]
        )
        return row


def read_seconds(path: Path, reads: int) -> list[float]:
    """The seconds of ``reads`` whole-file reads with ``pq.read_table`` (pyarrow's threads)."""
    pq = module("pyarrow.parquet")
    seconds = []
    for _ in range(reads):
        start = time.perf_counter()
        table = pq.read_table(path)
        seconds.append(time.perf_counter() - start)
        del table
    return seconds


def count_rows(ctx: BenchContext) -> int:
    """How many rows the file holds under the context's quick and scale options."""
    target = QUICK_BYTES if ctx.quick else FULL_BYTES
    return max(2 * BATCH_SIZE, int(target * ctx.scale) // ROW_BYTES)


@workload(
    "parquet_numeric",
    "1.07 GB Parquet (0.27 GB with --quick) of 16 float32 + int64 label, "
    "row-group shuffle, batch 1024, vs torch "
    "over a per-row pyarrow reader and vs pq.read_table",
    default=False,
    requires=(("pyarrow", "arrow"),),
)
def prepare(ctx: BenchContext) -> Prepared:
    """Write (or reuse) the file, time whole reads of it, read it shuffled."""
    pq = module("pyarrow.parquet")
    n = count_rows(ctx)
    path = numeric_file(ctx.cache_dir, n, ctx.log)
    ds = decoded_parquet(path, ctx)
    sampler, order, shuffle = parquet_shuffle(ds, path, SEED)
    ctx.log(f"parquet_numeric: timing {READS} whole reads with pq.read_table")
    reads = read_seconds(path, READS)
    limit = n / statistics.median(reads)
    to_array = columns_array(COLUMNS)
    runners: list[Runner] = []
    if ctx.wants("stoker"):

        def stoker_loader(workers: int) -> Any:
            def make() -> Any:
                loader = sk.DataLoader(
                    ds, batch_size=BATCH_SIZE, sampler=sampler, num_workers=workers
                )
                return AsArrays(loader, "label", to_array)

            return make

        for workers in (0, WORKERS):
            runners.append(
                Runner(
                    f"stoker x{workers}",
                    "stoker",
                    stoker_loader(workers),
                    limit=limit,
                    show_mode=workers > 0,
                )
            )
    torch_rows = min(n, TORCH_ROWS)
    if ctx.wants("torch"):
        torch = ctx.torch
        records = PerRowParquet(path, ds.row_group_sizes)
        part = OrderSampler(order[:torch_rows])

        def torch_loader() -> Any:
            loader = torch.utils.data.DataLoader(
                records, batch_size=BATCH_SIZE, sampler=part, num_workers=WORKERS
            )
            return AsArrays(loader, "label", to_array)

        label = f"torch x{WORKERS} per-row ({torch_rows:,} rows)"
        runners.append(Runner(label, "torch", torch_loader, samples=torch_rows))

    table: list[Any] = []

    def reference() -> Iterator[np.ndarray]:
        if not table:
            # One chunk a column: a take from chunked columns joins them every time.
            table.append(pq.read_table(path).combine_chunks())
        for idx in index_batches(order, BATCH_SIZE):
            yield to_array(table[0].take(idx))

    return Prepared(
        summary=(
            f"{gigabytes(n * ROW_BYTES)} Parquet ({n:,} rows) of 16 float32 + int64 label, "
            "row-group shuffle, batch 1024, vs torch over a per-row pyarrow reader and vs "
            "pq.read_table"
        ),
        samples=n,
        record_bytes=ROW_BYTES,
        runners=tuple(runners),
        reference=reference,
        exact_batches=EXACT_BATCHES,
        params={
            "records": n,
            "batch_size": BATCH_SIZE,
            "columns": "16 float32 + int64 label",
            "file": str(path),
            "file_bytes": path.stat().st_size,
            "row_group_rows": GROUP_ROWS,
            "shuffle": shuffle,
            "torch_rows": torch_rows,
            "torch_cached_row_groups": CACHED_GROUPS,
            "read_table_seconds": reads,
            "read_table_samples_per_s": limit,
            "seed": SEED,
        },
        targets=(
            Target(f"stoker x{WORKERS}", "speed", 2.0),
            Target(f"stoker x{WORKERS}", "of_limit", 0.5),
            Target("stoker x0", "of_limit", 0.5),
        ),
    )
