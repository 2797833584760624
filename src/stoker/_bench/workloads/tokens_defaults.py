"""``tokens_pad_defaults``: token lists in a Parquet file written with pyarrow's defaults.

The file a new user has: ``pq.write_table(table, path)`` with nothing set, so 200,000
int32 token lists (16-1024 tokens, ~0.42 GB decoded, ~0.2 GB on disk) are one row
group. Each loader shuffles, pads every record to 512 tokens and batches 32, with 0
and 2 workers:

* ``stoker defaults``: ``sk.DataLoader(sk.from_parquet(path), shuffle=True, ...)``
  with nothing tuned. The data are larger than the decode cache, so the first batch
  of the first run writes the decoded copy (``cache_dir="auto"``, in the default
  cache folder) and later runs reuse it: the first run's time includes that decode
  (as much as one epoch of reads here), the median of three does not.
* ``stoker tuned``: the configuration a user would pick by hand,
  ``sk.from_parquet(path, cache_dir=<cache folder>/parquet-decoded)`` written before
  timing (``ds.write_cache()``), also with ``shuffle=True``.
* ``torch``: HuggingFace ``datasets.Dataset.from_parquet(path).with_format("numpy")``
  (its Arrow copy made before timing) fed to the PyTorch DataLoader with a NumPy
  padding ``collate_fn``. It reads stoker's epoch order through a fixed sampler
  (as ``shuffle=True`` costs, a permutation), so every batch can be verified against
  a reference read with pyarrow.

``--quick`` uses 20,000 records (they fit the decode cache: no copy is made).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, Target
from . import workload
from ._common import OrderSampler, index_batches
from ._tables import AsArrays, decoded_parquet, hf_offline, module, write_once
from .tokens import MAX_LEN, MIN_LEN, PAD_LENGTH, VOCAB, pad_array, pad_rows, torch_pad_collate

RECORDS = 200_000
QUICK_RECORDS = 20_000
BATCH_SIZE = 32
WORKERS = (0, 2)
SEED = 0
EXACT_BATCHES = 8


def _write_defaults(n: int, path: Path) -> None:
    pa, pq = module("pyarrow"), module("pyarrow.parquet")
    rng = np.random.Generator(np.random.PCG64([SEED, n]))
    lengths = rng.integers(MIN_LEN, MAX_LEN + 1, size=n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(0, VOCAB, size=int(offsets[-1]), dtype=np.int32)
    tokens = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    pq.write_table(pa.table({"tokens": tokens}), path)  # pyarrow's defaults


def _pad(loader_rows: Any) -> Any:
    return AsArrays(loader_rows, "tokens", pad_array)


@workload(
    "tokens_pad_defaults",
    "200k int32 token lists in a Parquet file written with pyarrow's defaults (one row "
    "group), shuffle=True, padded to 512, batch 32, 0 and 2 workers: nothing tuned vs "
    "hand-tuned vs HF datasets + torch",
    default=False,
    requires=(("pyarrow", "arrow"), ("datasets", "hf")),
)
def prepare(ctx: BenchContext) -> Prepared:
    """stoker with nothing tuned, stoker tuned by hand, and HF + torch, on one file."""
    n = max(2 * BATCH_SIZE, int((QUICK_RECORDS if ctx.quick else RECORDS) * ctx.scale))
    path = ctx.cache_dir / f"tokens-defaults-{n}.parquet"
    write_once(path, functools.partial(_write_defaults, n), f"{n:,} token lists", ctx.log)
    order = sk.RandomSampler(n, seed=SEED).cursor(epoch=0).take(n)
    collate = functools.partial(sk.pad_collate, max_length=PAD_LENGTH)
    tuned = decoded_parquet(path, ctx) if ctx.wants("stoker") else None
    hf: Any = None
    if ctx.wants("torch"):
        hf_cache = hf_offline(ctx.cache_dir)
        datasets = module("datasets")
        hf = datasets.Dataset.from_parquet(str(path), cache_dir=str(hf_cache))
        hf = hf.with_format("numpy")
    torch = ctx.torch
    runners: list[Runner] = []
    for workers in WORKERS:
        if ctx.wants("stoker"):

            def defaults(workers: int = workers) -> Any:
                return _pad(
                    sk.DataLoader(
                        sk.from_parquet(path),
                        batch_size=BATCH_SIZE,
                        shuffle=True,
                        seed=SEED,
                        collate_fn=collate,
                        num_workers=workers,
                    )
                )

            def hand_tuned(workers: int = workers) -> Any:
                return _pad(
                    sk.DataLoader(
                        tuned,
                        batch_size=BATCH_SIZE,
                        shuffle=True,
                        seed=SEED,
                        collate_fn=collate,
                        num_workers=workers,
                    )
                )

            versus = f"torch pad x{workers}"
            for label, make in (("defaults", defaults), ("tuned", hand_tuned)):
                runners.append(
                    Runner(
                        f"stoker {label} x{workers}",
                        "stoker",
                        make,
                        versus=versus,
                        show_mode=workers > 0,
                    )
                )
        if hf is not None:

            def torch_pad(workers: int = workers) -> Any:
                loader = torch.utils.data.DataLoader(
                    hf,
                    batch_size=BATCH_SIZE,
                    sampler=OrderSampler(order),
                    collate_fn=functools.partial(torch_pad_collate, torch),
                    num_workers=workers,
                )
                return _pad(loader)

            runners.append(Runner(f"torch pad x{workers}", "torch", torch_pad))

    column: list[Any] = []

    def reference() -> Iterator[np.ndarray]:
        if not column:
            table = module("pyarrow.parquet").read_table(path, columns=["tokens"])
            column.append(table.column("tokens").combine_chunks())
        for idx in index_batches(order, BATCH_SIZE):
            chunk = column[0].take(idx)
            rows = (np.asarray(chunk[i].values) for i in range(len(chunk)))
            yield pad_rows(rows, np.zeros((len(idx), PAD_LENGTH), dtype=np.int32))

    groups = module("pyarrow.parquet").read_metadata(path).num_row_groups
    return Prepared(
        summary=(
            f"{n:,} int32 token lists ({MIN_LEN}-{MAX_LEN} tokens) in a Parquet file written "
            f"with pyarrow's defaults ({groups} row group), shuffle=True, padded to "
            f"{PAD_LENGTH}, batch 32, 0 and 2 workers: nothing tuned vs tuned vs HF + torch"
        ),
        samples=n,
        record_bytes=PAD_LENGTH * 4,
        runners=tuple(runners),
        reference=reference,
        exact_batches=EXACT_BATCHES,
        params={
            "records": n,
            "batch_size": BATCH_SIZE,
            "num_workers": list(WORKERS),
            "lengths": [MIN_LEN, MAX_LEN],
            "file": str(path),
            "file_bytes": path.stat().st_size,
            "row_groups": groups,
            "shuffle": "full shuffle (shuffle=True)",
            "seed": SEED,
            "pad_length": PAD_LENGTH,
        },
        targets=tuple(Target(f"stoker defaults x{w}", "speed", 3.0) for w in WORKERS),
    )
