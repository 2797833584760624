"""``parquet_numeric_defaults``: 1.07 GB of numbers in a Parquet file written with defaults.

The same 16 float32 columns + an int64 label as ``parquet_numeric`` (14.9 million
rows), but written as ``pq.write_table`` writes a table with nothing set: row groups
of 1,048,576 rows (~76 MB decoded each, 15 of them), snappy. Each loader reads a full
shuffle, batch 1024:

* ``stoker defaults x0`` / ``x2``: ``sk.DataLoader(sk.from_parquet(path),
  shuffle=True, ...)`` with nothing tuned. The data are larger than the decode cache,
  so the first batch of the first run writes the decoded copy (``cache_dir="auto"``,
  in the default cache folder) and later runs reuse it (the median of three runs
  does not include that decode).
* ``stoker tuned x2``: ``cache_dir=<cache folder>/parquet-decoded`` written before
  timing (``ds.write_cache()``), ``shuffle=True``.
* ``torch x2 per-row``: the PyTorch DataLoader, 2 worker processes, over the
  per-row pyarrow reader of ``parquet_numeric`` keeping every row group decoded (16
  a worker: a full shuffle touches all of them), over the first 131,072 rows of the
  same order.

The limit is ``pq.read_table``'s time for the whole file (median of 5 reads, page
cache warm); targets: stoker with nothing tuned at least 2x the per-row reader and
half of rows / that time. ``--quick`` uses a ~0.27 GB file.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, Target, gigabytes
from . import workload
from ._common import OrderSampler, index_batches
from ._tables import AsArrays, columns_array, decoded_parquet, module, write_once
from .parquet_numeric import (
    BATCH_SIZE,
    COLUMNS,
    FEATURES,
    READS,
    ROW_BYTES,
    SEED,
    TORCH_ROWS,
    PerRowParquet,
    count_rows,
    read_seconds,
)

DEFAULT_GROUP_ROWS = 1 << 20  # pyarrow's default row group size
WORKERS = 2
EXACT_BATCHES = 4


def _write_defaults(n: int, path: Path) -> None:
    pa, pq = module("pyarrow"), module("pyarrow.parquet")
    fields = [(name, pa.float32()) for name in COLUMNS[:-1]] + [("label", pa.int64())]
    schema = pa.schema(fields)
    # Pieces of exactly one default row group: the layout pq.write_table(table, path)
    # gives the whole table, without holding it all in memory.
    with pq.ParquetWriter(path, schema) as writer:
        for group, start in enumerate(range(0, n, DEFAULT_GROUP_ROWS)):
            rows = min(DEFAULT_GROUP_ROWS, n - start)
            rng = np.random.Generator(np.random.PCG64([SEED, group, 1]))
            features = rng.standard_normal((FEATURES, rows), dtype=np.float32)
            label = rng.integers(0, 1000, size=rows, dtype=np.int64)
            arrays = [pa.array(column) for column in features] + [pa.array(label)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))


@workload(
    "parquet_numeric_defaults",
    "1.07 GB Parquet of 16 float32 + int64 label written with pyarrow's defaults, "
    "shuffle=True, batch 1024: nothing tuned vs tuned vs a per-row reader and pq.read_table",
    default=False,
    requires=(("pyarrow", "arrow"),),
)
def prepare(ctx: BenchContext) -> Prepared:
    """Write (or reuse) the file, time whole reads of it, read it shuffled."""
    pq = module("pyarrow.parquet")
    n = count_rows(ctx)
    path = ctx.cache_dir / f"numeric-defaults-16xf32-i64-{n}.parquet"
    what = f"{n:,} rows of 16 float32 columns and a label (pyarrow's defaults)"
    write_once(path, functools.partial(_write_defaults, n), what, ctx.log)
    order = sk.RandomSampler(n, seed=SEED).cursor(epoch=0).take(n)
    ctx.log(f"parquet_numeric_defaults: timing {READS} whole reads with pq.read_table")
    limit = n / statistics.median(read_seconds(path, READS))
    to_array = columns_array(COLUMNS)
    runners: list[Runner] = []
    if ctx.wants("stoker"):
        tuned = decoded_parquet(path, ctx)

        def stoker_loader(ds: Any, workers: int) -> Any:
            def make() -> Any:
                loader = sk.DataLoader(
                    sk.from_parquet(path) if ds is None else ds,
                    batch_size=BATCH_SIZE,
                    shuffle=True,
                    seed=SEED,
                    num_workers=workers,
                )
                return AsArrays(loader, "label", to_array)

            return make

        for label, ds, workers in (
            ("defaults x0", None, 0),
            (f"defaults x{WORKERS}", None, WORKERS),
            (f"tuned x{WORKERS}", tuned, WORKERS),
        ):
            runners.append(
                Runner(
                    f"stoker {label}",
                    "stoker",
                    stoker_loader(ds, workers),
                    limit=limit,
                    show_mode=workers > 0,
                )
            )
    torch_rows = min(n, TORCH_ROWS)
    if ctx.wants("torch"):
        torch = ctx.torch
        groups = pq.read_metadata(path).num_row_groups
        sizes = [min(DEFAULT_GROUP_ROWS, n - g * DEFAULT_GROUP_ROWS) for g in range(groups)]
        records = PerRowParquet(path, sizes, cached_groups=groups)

        def torch_loader() -> Any:
            loader = torch.utils.data.DataLoader(
                records,
                batch_size=BATCH_SIZE,
                sampler=OrderSampler(order[:torch_rows]),
                num_workers=WORKERS,
            )
            return AsArrays(loader, "label", to_array)

        label = f"torch x{WORKERS} per-row ({torch_rows:,} rows)"
        runners.append(Runner(label, "torch", torch_loader, samples=torch_rows))

    table: list[Any] = []

    def reference() -> Iterator[np.ndarray]:
        if not table:
            table.append(pq.read_table(path).combine_chunks())
        for idx in index_batches(order, BATCH_SIZE):
            yield to_array(table[0].take(idx))

    return Prepared(
        summary=(
            f"{gigabytes(n * ROW_BYTES)} Parquet ({n:,} rows) of 16 float32 + int64 label "
            "written with pyarrow's defaults, shuffle=True, batch 1024, vs a per-row reader "
            "and pq.read_table"
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
            "row_group_rows": DEFAULT_GROUP_ROWS,
            "shuffle": "full shuffle (shuffle=True)",
            "torch_rows": torch_rows,
            "read_table_samples_per_s": limit,
            "seed": SEED,
        },
        targets=(
            Target(f"stoker defaults x{WORKERS}", "speed", 2.0),
            Target(f"stoker defaults x{WORKERS}", "of_limit", 0.5),
            Target("stoker defaults x0", "of_limit", 0.5),
        ),
    )
