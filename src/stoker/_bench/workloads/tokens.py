"""``tokens_pad``, ``tokens_pack``: 500,000 int32 token lists (16-1024) in Parquet, batch 32.

Two workloads (pipelines), each with 0 and 2 workers on both sides (registered
in the order of their names, as ``stoker bench --list`` shows them):

* ``tokens_pad``: every record padded with 0 (or truncated) to 512 tokens.
  stoker: ``sk.from_parquet(path, cache_dir=<cache folder>/parquet-decoded)`` +
  ``collate_fn=partial(sk.pad_collate, max_length=512)``.
  torch: HuggingFace ``datasets.Dataset.from_parquet(path).with_format("numpy")`` fed
  to the PyTorch DataLoader (which reads a batch with the dataset's ``__getitems__``)
  with a NumPy padding ``collate_fn``.
* ``tokens_pack``: records packed into rows of 2048 tokens by ``sk.pack``'s rule: in
  order, each record goes into the first row of the batch with room for it, and the
  first record that fits in none of the batch's 32 rows starts the next batch; with
  ``segment_ids`` (1, 2, ... per record in its row, 0 for padding) and
  ``positions`` (0 .. length - 1 in each record). stoker:
  ``sk.pack(ds, 2048)``. torch: the same HF dataset through the PyTorch DataLoader
  (batches of 32 records in the epoch order), packed by :func:`greedy_pack` in the
  main process. Packing in the main process keeps torch's rows identical to
  stoker's for any worker count (torch's workers read and convert the records; an
  ``IterableDataset`` packing in each worker would pack a different split of the
  records per worker count, so its batches could not be verified).

Every loader reads the same epoch order: stoker's row-group-aligned
``shuffle_sampler(seed=0)`` (a file larger than the decode cache; a smaller one,
``--quick``, is read with a full ``RandomSampler``), passed to torch as a fixed
sampler, so every batch is compared element by element with a reference read with
pyarrow. HF's numpy format returns int64 token arrays; torch's collate writes them
into int32 batches, stoker's int32 columns stay int32.

The Parquet file (~0.55 GB, row groups of 8,192 rows) is written once into the cache
folder, HF's Arrow copy of it (~1 GB) under ``hf-datasets/`` there, and stoker's
decoded copy (``ds.write_cache()``, ~1 GB of values + offsets) under
``parquet-decoded/``, both before timing; nothing is downloaded
(``HF_DATASETS_OFFLINE=1``). ``--quick`` uses 50,000 records.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, Target
from . import workload
from ._common import OrderSampler, index_batches
from ._greedy_pack import PACK_FIELDS, PACK_LENGTH, greedy_pack, pack_count
from ._tables import AsArrays, decoded_parquet, hf_offline, module, parquet_shuffle, write_once

RECORDS = 500_000
QUICK_RECORDS = 50_000
MIN_LEN, MAX_LEN = 16, 1024
VOCAB = 50_000
GROUP_ROWS = 8192
BATCH_SIZE = 32
PAD_LENGTH = 512
WORKERS = (0, 2)
SEED = 0
EXACT_BATCHES = 8


def group_lengths(group: int, rows: int) -> np.ndarray:
    """The token counts of row group ``group`` (its first draw from ``PCG64([SEED, group])``)."""
    rng = np.random.Generator(np.random.PCG64([SEED, group]))
    return rng.integers(MIN_LEN, MAX_LEN + 1, size=rows)


def record_lengths(n: int) -> np.ndarray:
    """The token count of every record of an ``n``-record file, without reading it."""
    groups = range(0, n, GROUP_ROWS)
    return np.concatenate([group_lengths(g, min(GROUP_ROWS, n - s)) for g, s in enumerate(groups)])


def _write_tokens(n: int, path: Path) -> None:
    pa, pq = module("pyarrow"), module("pyarrow.parquet")

    schema = pa.schema([("tokens", pa.list_(pa.int32()))])
    with pq.ParquetWriter(path, schema) as writer:
        for group, start in enumerate(range(0, n, GROUP_ROWS)):
            rows = min(GROUP_ROWS, n - start)
            rng = np.random.Generator(np.random.PCG64([SEED, group]))
            lengths = rng.integers(MIN_LEN, MAX_LEN + 1, size=rows)
            offsets = np.zeros(rows + 1, dtype=np.int32)
            np.cumsum(lengths, out=offsets[1:])
            values = rng.integers(0, VOCAB, size=int(offsets[-1]), dtype=np.int32)
            tokens = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
            writer.write_table(pa.table({"tokens": tokens}, schema=schema))


def tokens_file(cache_dir: Path, n: int, log: Any) -> Path:
    """The Parquet file of ``n`` token records, written first when missing.

    Row group ``g`` (``GROUP_ROWS`` records) draws its lengths, then its tokens, from
    ``PCG64([SEED, g])``.
    """
    path = cache_dir / f"tokens-int32-{n}-g{GROUP_ROWS}.parquet"
    return write_once(path, functools.partial(_write_tokens, n), f"{n:,} token lists", log)


# -- padding -------------------------------------------------------------------------


def pad_rows(rows: Iterable[np.ndarray], out: np.ndarray) -> np.ndarray:
    """Rows written into ``out`` (zeros), each truncated to its width: the plain NumPy pad."""
    width = out.shape[1]
    for i, row in enumerate(rows):
        row = row[:width]
        out[i, : len(row)] = row
    return out


def torch_pad_collate(torch: Any, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The torch pipeline's collate: HF records padded into an int32 tensor."""
    out = np.zeros((len(records), PAD_LENGTH), dtype=np.int32)
    return {"tokens": torch.from_numpy(pad_rows((r["tokens"] for r in records), out))}


def pad_array(batch: Any) -> np.ndarray:
    """A padded batch as the array the reference holds."""
    tokens = batch["tokens"]
    return tokens if isinstance(tokens, np.ndarray) else np.asarray(tokens.numpy())


# -- packing ---------------------------------------------------------------------------


def _hf_tokens(records: list[dict[str, Any]]) -> list[np.ndarray]:
    """torch's collate for packing: the records' token arrays, as they are."""
    return [r["tokens"] for r in records]


class TorchPacked:
    """torch's packing pipeline: the DataLoader's records packed in the main process."""

    def __init__(self, torch: Any, loader: Iterable[list[np.ndarray]]) -> None:
        self._torch = torch
        self._loader = loader

    def __iter__(self) -> Iterator[dict[str, Any]]:
        from_numpy = self._torch.from_numpy
        records = (record for batch in self._loader for record in batch)
        for batch in greedy_pack(records, BATCH_SIZE):
            yield {f: from_numpy(a) for f, a in batch.items()}


def pack_array(batch: Any) -> np.ndarray:
    """A packed batch as one int64 array: tokens, segment ids, positions side by side."""
    parts = []
    for field in PACK_FIELDS:
        value = batch[field]
        parts.append(np.asarray(value if isinstance(value, np.ndarray) else value.numpy()))
    return np.concatenate(parts, axis=1).astype(np.int64)


# -- the workloads ---------------------------------------------------------------------


def count_records(ctx: BenchContext) -> int:
    """How many records the file holds under the context's quick and scale options."""
    return max(2 * BATCH_SIZE, int((QUICK_RECORDS if ctx.quick else RECORDS) * ctx.scale))


@dataclass(frozen=True)
class Setup:
    """What both pipelines read: the file, stoker's dataset and sampler, the epoch
    order, and HF's dataset (None without torch rows)."""

    path: Path
    ds: Any
    sampler: Any
    order: np.ndarray
    shuffle: str
    hf: Any

    def params(self, **more: Any) -> dict[str, Any]:
        """The JSON report's parameters."""
        return {
            "records": len(self.order),
            "batch_size": BATCH_SIZE,
            "num_workers": list(WORKERS),
            "lengths": [MIN_LEN, MAX_LEN],
            "file": str(self.path),
            "file_bytes": self.path.stat().st_size,
            "row_group_rows": GROUP_ROWS,
            "shuffle": self.shuffle,
            "seed": SEED,
            **more,
        }

    def rows(self) -> Callable[[np.ndarray], list[np.ndarray]]:
        """A reader of the records at some indices, with pyarrow (the whole column
        read once, on first use)."""
        pq = module("pyarrow.parquet")

        column: list[Any] = []

        def rows(idx: np.ndarray) -> list[np.ndarray]:
            if not column:
                # One chunk: a take from a chunked column joins its chunks every time.
                table = pq.read_table(self.path, columns=["tokens"])
                column.append(table.column("tokens").combine_chunks())
            chunk = column[0].take(idx)
            return [np.asarray(chunk[i].values) for i in range(len(chunk))]

        return rows


def setup(ctx: BenchContext) -> Setup:
    """Write (or reuse) the token file and open it for both loaders."""
    n = count_records(ctx)
    path = tokens_file(ctx.cache_dir, n, ctx.log)
    ds = decoded_parquet(path, ctx)
    sampler, order, shuffle = parquet_shuffle(ds, path, SEED)
    hf: Any = None
    if ctx.wants("torch"):
        hf_cache = hf_offline(ctx.cache_dir)
        datasets = module("datasets")

        hf = datasets.Dataset.from_parquet(str(path), cache_dir=str(hf_cache))
        hf = hf.with_format("numpy")
    return Setup(path, ds, sampler, order, shuffle, hf)


REQUIRES = (("pyarrow", "arrow"), ("datasets", "hf"))


@workload(
    "tokens_pack",
    "the same token lists, shuffled, packed greedily into rows of 2048, batch 32, "
    "0 and 2 workers, vs HF datasets + torch",
    default=False,
    requires=REQUIRES,
)
def prepare_pack(ctx: BenchContext) -> Prepared:
    """``sk.pack`` against HF + torch records packed by :func:`greedy_pack`."""
    s = setup(ctx)
    packed_rows = pack_count(record_lengths(len(s.order))[s.order], BATCH_SIZE)
    runners: list[Runner] = []
    torch = ctx.torch
    for workers in WORKERS:
        if ctx.wants("stoker"):

            def stoker_pack(workers: int = workers) -> Any:
                loader = sk.DataLoader(
                    sk.pack(s.ds, PACK_LENGTH),
                    batch_size=BATCH_SIZE,
                    sampler=s.sampler,
                    num_workers=workers,
                )
                return AsArrays(loader, "tokens", pack_array)

            versus = f"torch pack x{workers}"
            runners.append(
                Runner(
                    f"stoker pack x{workers}",
                    "stoker",
                    stoker_pack,
                    versus=versus,
                    show_mode=workers > 0,
                )
            )
        if s.hf is not None:

            def torch_pack(workers: int = workers) -> Any:
                loader = torch.utils.data.DataLoader(
                    s.hf,
                    batch_size=BATCH_SIZE,
                    sampler=OrderSampler(s.order),
                    collate_fn=_hf_tokens,
                    num_workers=workers,
                )
                return AsArrays(TorchPacked(torch, loader), "tokens", pack_array)

            runners.append(Runner(f"torch pack x{workers}", "torch", torch_pack))
    rows = s.rows()

    def reference() -> Iterator[np.ndarray]:
        records = (r for idx in index_batches(s.order, BATCH_SIZE) for r in rows(idx))
        return (pack_array(batch) for batch in greedy_pack(records, BATCH_SIZE))

    return Prepared(
        summary=(
            f"the same {len(s.order):,} token lists, shuffled, packed greedily into rows of "
            f"{PACK_LENGTH}, batch 32, 0 and 2 workers, vs HF datasets + torch"
        ),
        samples=packed_rows,
        record_bytes=PACK_LENGTH * 4 * len(PACK_FIELDS),
        runners=tuple(runners),
        reference=reference,
        exact_batches=EXACT_BATCHES,
        params=s.params(
            pack_length=PACK_LENGTH,
            packed_rows=packed_rows,
            record="int32 (2048,) x tokens, segment_ids, positions",
        ),
        targets=tuple(Target(f"stoker pack x{w}", "speed", 3.0) for w in WORKERS),
    )


@workload(
    "tokens_pad",
    "500k int32 token lists (50k with --quick; 16-1024 tokens) in Parquet, "
    "shuffled, padded to 512, batch 32, "
    "0 and 2 workers, vs HF datasets + torch",
    default=False,
    requires=REQUIRES,
)
def prepare_pad(ctx: BenchContext) -> Prepared:
    """stoker's ``pad_collate`` against HF + torch with a NumPy padding collate."""
    s = setup(ctx)
    runners: list[Runner] = []
    torch = ctx.torch
    for workers in WORKERS:
        if ctx.wants("stoker"):

            def stoker_pad(workers: int = workers) -> Any:
                collate = functools.partial(sk.pad_collate, max_length=PAD_LENGTH)
                loader = sk.DataLoader(
                    s.ds,
                    batch_size=BATCH_SIZE,
                    sampler=s.sampler,
                    collate_fn=collate,
                    num_workers=workers,
                )
                return AsArrays(loader, "tokens", pad_array)

            versus = f"torch pad x{workers}"
            runners.append(
                Runner(
                    f"stoker pad x{workers}",
                    "stoker",
                    stoker_pad,
                    versus=versus,
                    show_mode=workers > 0,
                )
            )
        if s.hf is not None:

            def torch_pad(workers: int = workers) -> Any:
                loader = torch.utils.data.DataLoader(
                    s.hf,
                    batch_size=BATCH_SIZE,
                    sampler=OrderSampler(s.order),
                    collate_fn=functools.partial(torch_pad_collate, torch),
                    num_workers=workers,
                )
                return AsArrays(loader, "tokens", pad_array)

            runners.append(Runner(f"torch pad x{workers}", "torch", torch_pad))
    rows = s.rows()

    def reference() -> Iterator[np.ndarray]:
        for idx in index_batches(s.order, BATCH_SIZE):
            yield pad_rows(rows(idx), np.zeros((len(idx), PAD_LENGTH), dtype=np.int32))

    return Prepared(
        summary=(
            f"{len(s.order):,} int32 token lists (16-1024 tokens) in Parquet, shuffled, padded "
            f"to {PAD_LENGTH}, batch 32, 0 and 2 workers, vs HF datasets + torch"
        ),
        samples=len(s.order),
        record_bytes=PAD_LENGTH * 4,
        runners=tuple(runners),
        reference=reference,
        exact_batches=EXACT_BATCHES,
        params=s.params(pad_length=PAD_LENGTH, record="int32 (512,)"),
        targets=tuple(Target(f"stoker pad x{w}", "speed", 3.0) for w in WORKERS),
    )
