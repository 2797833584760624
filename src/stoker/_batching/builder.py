"""``BatchBuilder``: indices in, a collated batch out.

Two paths give the same batch. The bulk path asks the dataset to gather the whole
batch with vectorised NumPy work straight into a recycled buffer (``_gather``); the
record path fetches records (``_fetch``) and collates them. A failing fetch is
retried record by record to name the sample that failed; with ``on_error="skip"``
such records are dropped (and counted) instead.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._collate import default_collate
from .._context import SKIP, Context, Skip
from .._dataset import Dataset
from .._reads import thread_counts
from .._stats import SourceReads
from .._tree import TreeDef, flatten, row_records
from .gather import SPLIT_BYTES, SplitGather
from .pad import column_collate
from .pool import BufferPool
from .shared_rows import PlacedSlice, SharedRows, fits

__all__ = ["STREAM_ROW_BYTES", "BatchBuilder", "BuildCounters", "add_batch_index", "add_location"]

STREAM_ROW_BYTES = 64 << 10
"""Records of this many bytes or more (arrays only) are written into the batch's
planned buffer as each one is made, and each goes once the next one is made: a batch
of them never lives at once. Freed together, they would hand glibc enough memory to
give back to the system, and the next batch would take it again page by page."""


@dataclass
class BuildCounters:
    """Time and counts accumulated by a builder (read by the loader's stats)."""

    fetch_seconds: float = 0.0
    collate_seconds: float = 0.0
    transform_seconds: float = 0.0  # the part of fetch_seconds spent in map functions
    reads: SourceReads = field(default_factory=SourceReads)  # what the sources' decode caches did
    skipped: list[tuple[int, str]] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)  # one per skipped record


def add_location(
    exc: BaseException, sample_index: int | None, where: str, source: str | None = None
) -> None:
    """Attach the sample index and batch location to ``exc`` (PEP 678 note + attributes).

    ``source`` names where the record was read from (its file), when the dataset knows.
    """
    if getattr(exc, "_stoker_located", False):
        return
    sample = f"sample index {sample_index} " if sample_index is not None else ""
    if source is not None:
        sample += f"(read from {source!r}) "
    exc.add_note(f"stoker: raised while loading {sample}for {where}")
    try:
        exc._stoker_located = True  # type: ignore[attr-defined]
        if sample_index is not None:
            exc.sample_index = sample_index  # type: ignore[attr-defined]
    except AttributeError:  # exceptions with __slots__ cannot take attributes
        pass


def add_batch_index(exc: BaseException, batch_index: int) -> None:
    """Record the index (within its epoch) of the batch whose loading raised ``exc``."""
    if getattr(exc, "batch_index", None) is None:
        with contextlib.suppress(AttributeError):  # exceptions with __slots__
            exc.batch_index = batch_index  # type: ignore[attr-defined]


class _NoRecords(Dataset[Any]):
    """Stands in for the dataset of a builder that only collates (streams)."""

    def __len__(self) -> int:
        return 0


class BatchBuilder:
    """Builds batches from a map-style dataset for one iterator.

    With ``dataset=None`` it only collates (for streams, which read their own records).

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> builder = BatchBuilder(sk.range(0, 10), None, batch_size=4)
        >>> builder.build([(Context(), np.array([3, 1]))], "batch 0").tolist()
        [3, 1]
    """

    def __init__(
        self,
        dataset: Dataset[Any] | None,
        collate_fn: Callable[[list[Any]], Any] | None,
        batch_size: int,
        *,
        pool_slots: int = 4,
        pool: BufferPool | None = None,
        on_error: str = "raise",
        split: bool = True,
        count_reads: bool = True,
    ) -> None:
        self._dataset: Dataset[Any] = dataset if dataset is not None else _NoRecords()
        # Time in map functions and source reads, summed into ``counters``; a worker's
        # runtime measures them around its whole job instead (one reading, not two).
        self._count_reads = count_reads
        self._collate_fn = collate_fn
        self._pool = pool if pool is not None else BufferPool(batch_size, pool_slots)
        self._may_split = split
        self._on_error = on_error
        self._gathers = collate_fn is None and on_error == "raise"
        # pad_collate over a table source: the batch is padded from its columns.
        self._by_columns = column_collate(collate_fn) if on_error == "raise" else None
        self._split: SplitGather | None = None
        self._skips = self._dataset.may_skip or on_error == "skip"
        # Written row by row into the planned buffer (None: decided at the first one).
        self._streams: bool | None = None if collate_fn is None else False
        self.counters = BuildCounters()

    @property
    def dataset(self) -> Dataset[Any]:
        """The map-style dataset it reads (an empty stand-in when it only collates)."""
        return self._dataset

    @property
    def collate_fn(self) -> Callable[[list[Any]], Any] | None:
        """The loader's ``collate_fn``; None for the default collate."""
        return self._collate_fn

    @property
    def pool(self) -> BufferPool:
        return self._pool

    def build(
        self, parts: Sequence[tuple[Context, np.ndarray]], where: str, empty: Any = None
    ) -> Any:
        """The batch made of the records at each part's indices, in order.

        ``empty`` is returned when every record was skipped (filters, ``on_error``).
        """
        if self._gathers and len(parts) == 1:
            ctx, indices = parts[0]
            start = time.perf_counter()
            out = self._pool.acquire(len(indices))
            try:
                if out is not None and self._split is not None:
                    batch = self._split.gather(self._dataset, indices, ctx, out)
                else:
                    batch = self._dataset._gather(indices, ctx, out)
            except Exception as exc:
                self._locate(ctx, indices, where)  # raises the failing record's error
                add_location(exc, None, where)
                raise
            if batch is not NotImplemented:
                if out is None:
                    self._pool.adopt(batch)
                    self._maybe_split(batch)
                self.counters.fetch_seconds += time.perf_counter() - start
                return batch
            self._gathers = False
        if len(parts) == 1 and not self._skips:
            ctx, indices = parts[0]
            if self._by_columns is not None:
                batch = self._collate_columns(ctx, indices)
                if batch is not NotImplemented:
                    return batch
            if self._streams is not False:
                # Streamed records need their slot before they are made: one more
                # slot, where the pool may hold it, rather than the list path. Before
                # the plan, the first record's arrays size the batch's.
                out = self._pool.acquire(len(indices))
                if out is None:
                    out = self._pool.grow(len(indices))
                if out is not None or not self._pool.planned:
                    return self._stream(ctx, indices, where, out)
            return self.collate(self.records(ctx, indices, where))
        records: list[Any] = []
        for ctx, indices in parts:
            records.extend(self.records(ctx, indices, where))
        if self._skips:
            records = [r for r in records if r is not SKIP]
            if not records:
                return empty
        return self.collate(records)

    def _stream(self, ctx: Context, indices: np.ndarray, where: str, out: Any | None) -> Any:
        """The batch, each record written into ``out`` (a planned buffer; None: new
        arrays shaped after the first record's) as it is made.

        Records that are not big arrays of the planned shapes take the list path, and
        so does the rest of the batch once one record differs (its rows written so far
        read back as records): the batch, or the ``CollateError``, is what
        ``default_collate`` gives for the same records.
        """
        rows: list[np.ndarray] = []
        treedef = None
        if out is not None:
            rows, treedef = flatten(out)
            if self._streams is None:  # decided once, on the first batch
                self._streams = _streamable(rows, treedef, len(indices))
            if not self._streams:
                return self.collate(self.records(ctx, indices, where), out)

        def new_rows(leaves: list[np.ndarray], shape: TreeDef) -> list[np.ndarray] | None:
            if self._streams is None:
                self._streams = _streamable(leaves, shape, 1)
            if not self._streams:
                return None
            return [np.empty((len(indices), *a.shape), a.dtype) for a in leaves]

        rows, treedef, rest = self._write_each(ctx, indices, where, rows, treedef, new_rows)
        if rest is not None:
            return self.collate(rest)
        if treedef is None:  # no records
            return self.collate([])
        if out is None:
            out = treedef.unflatten(rows)
            if not self._pool.planned:
                self._pool.adopt(out)
        return out

    def stream_slice(
        self, ctx: Context, indices: np.ndarray, where: str, shared: SharedRows, first: int
    ) -> PlacedSlice | list[Any]:
        """A slice of a batch split across thread workers, its records written into
        rows ``first:`` of ``shared`` as they are made; its records (a list) when
        they are not big arrays that fit the batch."""
        if self._streams is False:
            return self.records(ctx, indices, where)
        n = len(indices)

        def shared_rows(leaves: list[np.ndarray], shape: TreeDef) -> list[np.ndarray] | None:
            full = shared.rows_for(leaves, shape) if _streamable(leaves, shape, 1) else None
            return None if full is None else [row[first : first + n] for row in full]

        _, _, rest = self._write_each(ctx, indices, where, [], None, shared_rows)
        if rest is not None:
            return rest
        return PlacedSlice(shared, first, first + n)

    def _write_each(
        self,
        ctx: Context,
        indices: np.ndarray,
        where: str,
        rows: list[np.ndarray],
        treedef: TreeDef | None,
        rows_for: Callable[[list[np.ndarray], TreeDef], list[np.ndarray] | None],
    ) -> tuple[list[np.ndarray], TreeDef | None, list[Any] | None]:
        """Make the records at ``indices`` one at a time, each written into its row of
        ``rows`` (a batch of structure ``treedef``) at once; without them yet,
        ``rows_for(first record's arrays, its structure)`` gives them (None: they do
        not stream). Returns the rows, their structure and, when a record did not
        fit, every record (those written read back from their rows) instead.
        """
        start, before = time.perf_counter(), self._thread_counts()
        writing = 0.0
        rest: list[Any] | None = None
        try:
            made = self._dataset._fetch_each(indices, ctx)
            k = 0  # (not enumerate: its reused tuple would hold a record one more turn)
            for record in made:
                leaves, shape = flatten(record)
                if treedef is None:  # the first record: it sizes the rows
                    found = rows_for(leaves, shape)
                    if found is None:
                        rest = [record, *made]
                        break
                    rows, treedef = found, shape
                if shape != treedef or not fits(leaves, rows):
                    self._streams = False  # the records vary: the list path from now on
                    rest = [*row_records(treedef, rows, 0, k), record, *made]
                    break
                began = time.perf_counter()
                for row, leaf in zip(rows, leaves, strict=True):
                    row[k] = leaf
                writing += time.perf_counter() - began
                # The record stays until the next one is made, then goes. Its block
                # then lies above what the next record's steps free, so glibc keeps
                # that memory for reuse instead of trimming it from the top of the
                # heap (and the next record taking it back page by page).
                last = record  # noqa: F841 (held, not read)
                del record, leaves, leaf
                k += 1  # noqa: SIM113 (see above)
        except Exception as exc:
            self._one_by_one(ctx, indices, where, exc)  # raises the record's error, located
            raise
        finally:
            self._count_fetch(start, before, writing)
        return rows, treedef, rest

    def _collate_columns(self, ctx: Context, indices: np.ndarray) -> Any:
        """The batch collated from the dataset's columns, or ``NotImplemented`` (a dataset
        without them, or a read that failed: the record path then names the record)."""
        if self._by_columns is None:
            return NotImplemented
        start = time.perf_counter()
        try:
            columns = self._dataset._fetch_columns(indices, ctx)
        except Exception:
            return NotImplemented
        finally:
            self.counters.fetch_seconds += time.perf_counter() - start
        if columns is NotImplemented:
            self._by_columns = None
            return NotImplemented
        start = time.perf_counter()
        try:
            return self._by_columns(columns)
        finally:
            self.counters.collate_seconds += time.perf_counter() - start

    def _maybe_split(self, batch: Any) -> None:
        # Large planned gathers are split across cores (see stoker._batching.gather).
        if self._split is None and self._may_split and self._pool.slots:
            leaves, _ = flatten(batch)
            if sum(leaf.nbytes for leaf in leaves) >= SPLIT_BYTES:
                split = SplitGather()
                self._split = split if split.useful else None

    def close(self) -> None:
        """End the threads of a split gather, if any were started (idempotent)."""
        if self._split is not None:
            self._split.close()

    def records(self, ctx: Context, indices: np.ndarray, where: str) -> list[Any | Skip]:
        """The records at ``indices``; SKIP for filtered (or, under "skip", failing) ones."""
        start, before = time.perf_counter(), self._thread_counts()
        try:
            return self._dataset._fetch(indices, ctx)
        except Exception as batch_exc:
            return self._one_by_one(ctx, indices, where, batch_exc)
        finally:
            self._count_fetch(start, before)

    def _thread_counts(self) -> tuple[float, int, SourceReads] | None:
        return thread_counts() if self._count_reads else None

    def _count_fetch(
        self, start: float, before: tuple[float, int, SourceReads] | None, writing: float = 0.0
    ) -> None:
        """Count a fetch begun at ``start`` (``before``: this thread's :func:`thread_counts`
        then, None when reads are not counted here); ``writing`` seconds of it were spent
        collating, as records were written."""
        counters = self.counters
        counters.fetch_seconds += time.perf_counter() - start - writing
        counters.collate_seconds += writing
        if before is None:
            return
        transform, hits, reads = before
        transformed, hit, read = thread_counts()
        counters.transform_seconds += transformed - transform
        if read is not reads or hit != hits:  # a source block was read
            counters.reads += (read - reads)._replace(hits=hit - hits)

    def _locate(self, ctx: Context, indices: np.ndarray, where: str) -> None:
        """After a bulk gather failed: read the records one by one and raise the first
        one's error, located (sample index, file); returns when every record loads."""
        for index in indices.tolist():
            try:
                self._dataset._fetch(np.array([index], dtype=np.int64), ctx)
            except Exception as exc:
                add_location(exc, index, where, self._source(index, ctx))
                raise exc from None

    def _source(self, index: int, ctx: Context) -> str | None:
        """The file record ``index`` was read from, if the dataset says (never raises:
        it only adds to an error that is already on its way)."""
        try:
            return self._dataset._record_name(index, ctx)
        except Exception:
            return None

    def _one_by_one(
        self, ctx: Context, indices: np.ndarray, where: str, batch_exc: Exception
    ) -> list[Any | Skip]:
        records: list[Any | Skip] = []
        for index in indices.tolist():
            try:
                (record,) = self._dataset._fetch(np.array([index], dtype=np.int64), ctx)
            except Exception as exc:
                add_location(exc, index, where, self._source(index, ctx))
                if self._on_error == "raise":
                    raise exc from None
                # Skipped; the iterator counts it against max_errors (``Tally``).
                self.counters.skipped.append((index, f"{type(exc).__name__}: {exc}"))
                self.counters.errors.append(exc)
                record = SKIP
            records.append(record)
        if self._on_error == "raise":
            # Every record loads on its own: the failure depends on the batch as a whole.
            add_location(batch_exc, None, where)
            raise batch_exc
        return records

    def collate(self, records: list[Any], out: Any = None) -> Any:
        """Collate ``records`` (into ``out``, or a recycled buffer when the plan allows)."""
        start = time.perf_counter()
        try:
            if self._collate_fn is not None:
                return self._collate_fn(records)
            if out is None:
                out = self._pool.acquire(len(records))
            batch = default_collate(records, out)
            if out is None:
                self._pool.adopt(batch)
            return batch
        finally:
            self.counters.collate_seconds += time.perf_counter() - start


def _streamable(rows: list[np.ndarray], treedef: TreeDef, count: int) -> bool:
    """True when records of ``count`` rows like ``rows`` (arrays only) are big
    enough to be written into their batch as each is made."""
    return sum(row.nbytes for row in rows) >= STREAM_ROW_BYTES * count and _only_arrays(treedef)


def _only_arrays(treedef: TreeDef) -> bool:
    """True when every leaf of a batch of this structure is an array (no strings,
    no objects: those are collated as lists)."""
    return treedef.kind != "leaf" and all(_only_arrays(child) for child in treedef.children)
