"""``BlockTable``: the one block protocol of the table sources read from storage.

Parquet, Arrow tables and datasets, HF datasets, Lance, SQLite and JSON Lines / CSV
all read their rows in *blocks* of consecutive rows: row groups, fragment pieces,
table slices, ranges of rowids, runs of lines.
What differs between them is only how the blocks are listed (their row counts, given
once when the dataset is built) and how one block is read (:meth:`_read_block`);
everything else lives here, once:

* a handle per worker, opened lazily and never pickled (:meth:`_handle`): per thread
  where the format needs one (a ``ParquetFile``, an ``sqlite3`` connection), else one
  per process shared by its threads;
* the decoded blocks kept in the process's one
  :class:`~stoker._sources.decode_cache.DecodeCache`, within ``cache_bytes``;
* a batch gathered from those blocks straight into the planned batch buffers
  (:func:`~stoker._sources.block_gather.gather_batch`), or, for a format that can
  read rows where they are (:meth:`_read_rows`), read directly when it is spread
  over many blocks that are not held (a shuffled batch); the batches of one window
  of a block-aligned shuffle share the blocks of the first (no cache lookups), and
  from the second on gather from one join of them (flat columns only);
* :meth:`BlockTable.shuffle_sampler`, the order aligned to the blocks;
* what was read and decoded counted for ``it.stats()`` (hits, blocks and bytes
  decoded, bytes decoded again).
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
import weakref
from typing import Any, ClassVar, NamedTuple

import numpy as np

from .._context import Context
from .._source_caches import CacheLayout
from ..errors import ConfigError, RecordValueError
from .block_gather import gather_batch, join_blocks, split_blocks, take_columns, which_blocks
from .block_shuffle import ChunkedShuffleSampler
from .columns import Columns, Ragged, column_batch, columns_nbytes
from .decode_cache import DecodeCache, count_decode, count_hits, process_cache
from .table import TableDataset

__all__ = ["BlockTable", "check_cache_bytes", "source_name"]

DENSITY = 16
"""A batch with fewer rows than this per block it touches is read row by row (by a
format that can) unless every block it touches is held already."""

_ABSENT = -(1 << 62)
"""The shift of a block not joined: any record's index plus it is negative."""

_FIRST = threading.Lock()  # guards the first creation of a dataset's per-process parts


def check_cache_bytes(cache_bytes: object) -> int:
    """``cache_bytes`` as every table source takes it: an int >= 0 (bytes).

    Example:
        >>> check_cache_bytes(64 << 20)
        67108864
    """
    if not isinstance(cache_bytes, int) or isinstance(cache_bytes, bool) or cache_bytes < 0:
        raise ConfigError(f"cache_bytes must be an int >= 0, got {cache_bytes!r}")
    return cache_bytes


def source_name(maker: str, paths: list[str]) -> str:
    """A file source in words, for the stats: ``from_parquet('t.parquet')`` (the first
    file's name, and how many more).

    Example:
        >>> source_name("from_csv", ["/data/a.csv", "/data/b.csv"])
        "from_csv('a.csv' and 1 more)"
    """
    if not paths:
        return f"{maker}()"
    first = os.path.basename(paths[0].rstrip("/")) or paths[0]
    more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
    return f"{maker}({first!r}{more})"


class _Handles:
    """A dataset's open handles in one process: one per thread, or one shared."""

    __slots__ = ("local", "lock", "shared")

    def __init__(self) -> None:
        self.local = threading.local()
        self.lock = threading.Lock()
        self.shared: Any = None


class _Window(NamedTuple):
    """The blocks of the last batch that read several (in a block-aligned shuffle, a
    window's), and, once a second batch read the same ones, their join (None: not
    joined) with :meth:`BlockTable._shifts` into it; ``tried``: the join was made or
    refused (lists of numbers, larger than a quarter of ``cache_bytes``)."""

    unique: list[int]
    blocks: list[Columns]
    joined: Columns | None
    shifts: np.ndarray
    tried: bool


_NONE = np.zeros(0, dtype=np.int64)


class BlockTable(TableDataset):
    """Rows read in blocks of consecutive rows, on the shared block protocol.

    A format calls :meth:`_set_blocks` with its blocks' row counts when it is built,
    and implements :meth:`_read_block` (and, when it can read rows where they lie,
    :meth:`_read_rows`); :meth:`_open_handle` opens what a worker reads with, which
    :meth:`_handle` hands out (per thread when ``_handle_per_thread``).

    Resources:
        Open handles live in the process (and thread) that opened them and are left
        out of a pickle; decoded blocks live in the process's decode cache, within
        ``cache_bytes``, and are let go when the dataset is collected.
    """

    _transient: ClassVar[tuple[str, ...]] = ("_handles", "_bad", "_key", "_window")
    _handle_per_thread: ClassVar[bool] = True
    _reads_rows: ClassVar[bool] = False  # whether _read_rows reads rows where they lie
    _block_unit: ClassVar[str] = "blocks"  # what its blocks are, in the stats' words
    _decoded_copy: ClassVar[bool] = False  # it can keep a decoded copy on disk (cache_dir=)

    _handles: _Handles | None
    _bad: set[int] | None  # blocks whose decode failed (read row by row from then on)
    _key: str | None  # this copy's blocks in its process's cache (None: none yet)
    _window: _Window | None  # the blocks of the last batch of several blocks

    def _set_blocks(self, sizes: list[int], cache_bytes: int, block_bytes: int = 0) -> None:
        """The blocks' row counts, in order; the budget of this source's decoded blocks;
        the bytes of the largest decoded block (0: not known)."""
        self._starts = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self._starts[1:])
        self._block_count = len(sizes)
        self._block_rows = max(sizes) if sizes else 1
        self._uniform = all(n == self._block_rows for n in sizes[:-1])
        self._cache_bytes = cache_bytes
        self._block_bytes = block_bytes
        self._decodes = 0
        self._handles = None
        self._bad = None
        self._key = None
        self._window = None

    # What a format provides.

    def _open_handle(self) -> Any:
        """A new handle to read with (None: the format opens nothing)."""
        return None

    def _read_block(self, block: int) -> Columns:
        """Every row of block ``block``, decoded, as columns."""
        raise NotImplementedError

    def _read_rows(self, indices: np.ndarray) -> Columns:
        """The rows at ``indices`` read where they lie (formats with ``_reads_rows``)."""
        raise NotImplementedError

    def _source_name(self) -> str:
        """How the source was built, in words, for the stats and the verdict."""
        return type(self).__name__

    # The protocol.

    @property
    def blocks_decoded(self) -> int:
        """Blocks decoded so far by this copy of the dataset in this process (misses)."""
        return self._decodes

    @property
    def block_sizes(self) -> list[int]:
        """Rows in every block, in dataset order."""
        sizes: list[int] = np.diff(self._starts).tolist()
        return sizes

    def shuffle_sampler(self, seed: int = 0, window: int | None = None) -> ChunkedShuffleSampler:
        """A shuffle aligned to the blocks: a few blocks read at a time, each once.

        Chunks are the size of the largest block; each epoch visits them in a random
        order and shuffles the rows within every ``window`` positions, so a batch
        reads a few whole blocks (each decoded once and cached) instead of one block
        per row. The default window is 4 blocks, fewer when the decode cache
        (``cache_bytes``) could not hold one more than the window (a window touches
        up to one block more than it spans). Every record comes once per epoch; the
        order depends only on ``(seed, epoch)`` and resumes exactly. Less random than
        ``shuffle=True``. Pass it as ``sampler=`` (without ``shuffle=True``).

        Example:
            >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, os, stoker as sk
            >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
            >>> pq.write_table(pa.table({"x": list(range(10))}), path, row_group_size=4)
            >>> sampler = sk.from_parquet(path).shuffle_sampler(seed=0)
            >>> sampler.chunk_size, sorted(sampler.cursor(0).take(10).tolist()) == list(range(10))
            (4, True)
        """
        size = self._block_rows
        if window is None:
            fits = self._cache_bytes // self._block_bytes if self._block_bytes else 5
            window = size * max(1, min(4, fits - 1))
        return ChunkedShuffleSampler(len(self), chunk_size=size, window=window, seed=seed)

    def _handle(self) -> Any:
        """This thread's handle (or the process's), opened on first use."""
        handles = self._handles
        if handles is None:
            with _FIRST:
                handles = self._handles
                if handles is None:
                    handles = self._handles = _Handles()
        if self._handle_per_thread:
            handle = getattr(handles.local, "handle", None)
            if handle is None:
                handle = handles.local.handle = self._open_handle()
            return handle
        handle = handles.shared
        if handle is None:
            with handles.lock:
                handle = handles.shared
                if handle is None:
                    handle = handles.shared = self._open_handle()
        return handle

    def _locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The block of every index and its row in that block."""
        blocks = self._block_numbers(indices)
        return blocks, self._rows(indices, blocks)

    def _block_numbers(self, indices: np.ndarray) -> np.ndarray:
        """The block of every index."""
        if self._uniform:  # every block but the last has the same size: divide
            blocks: np.ndarray = indices // self._block_rows
            return blocks
        return np.searchsorted(self._starts, indices, side="right") - 1

    def _rows(self, indices: np.ndarray, blocks: np.ndarray) -> np.ndarray:
        """The row of every index in its block ``blocks``."""
        shift = blocks * self._block_rows if self._uniform else self._starts[blocks]
        rows: np.ndarray = indices - shift
        return rows

    def _cache(self) -> tuple[DecodeCache, str]:
        """The process's decode cache and this copy's key in it (registered once)."""
        cache = process_cache()
        key = self._key
        if key is None:
            with _FIRST:
                key = self._key
                if key is None:
                    key = uuid.uuid4().hex
                    layout = CacheLayout(
                        self._source_name(),
                        self._block_unit,
                        self._block_count,
                        self._cache_bytes,
                        self._decoded_copy,
                    )
                    cache.register(key, self._cache_bytes, layout)
                    weakref.finalize(self, cache.release, key)
                    self._key = key
        return cache, key

    def _decode(self, block: int) -> Columns:
        self._decodes += 1
        return self._read_block(block)

    def _blocks(self, unique: list[int], rows: int) -> list[Columns] | None:
        """The decoded blocks ``unique`` of a batch of ``rows`` rows, from the cache or
        read now; None when the batch is better read row by row."""
        cache, key = self._cache()
        bad = self._bad
        spread = len(unique) * DENSITY > rows or (bad and bad.intersection(unique))
        if self._reads_rows and spread:
            held: list[Columns] | None = cache.peek(key, unique)
            return held
        blocks: list[Columns] = []
        for block in unique:
            try:
                decode = functools.partial(self._decode, block)
                blocks.append(cache.get((key, block), decode, columns_nbytes))
            except RecordValueError:
                if not self._reads_rows:
                    raise
                # A value its column cannot hold: read the batch's own rows (an error
                # then names its record; the block's other rows stay readable).
                if self._bad is None:
                    self._bad = set()
                self._bad.add(block)
                return None
        return blocks

    def _direct(self, indices: np.ndarray) -> Columns:
        """The rows at ``indices`` read where they lie, counted as one block decoded."""
        columns = self._read_rows(indices)
        count_decode(columns_nbytes(columns), again=False)
        return columns

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_decodes"] = 0
        return state

    def _read_columns(self, indices: np.ndarray) -> Columns:
        if not len(indices):
            return self._empty()
        numbers, rows = self._locate(indices)
        unique, block_of = which_blocks(numbers)
        blocks = self._blocks(unique.tolist(), len(indices))
        if blocks is None:
            return self._direct(indices)
        return take_columns(blocks, block_of.reshape(-1), rows)

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        if not len(indices):
            return column_batch(self._empty(), out)
        numbers = self._block_numbers(indices)
        window = self._window
        if window is not None and window.joined is not None:
            # One gather from the window's blocks, joined. A block not joined makes its
            # records' positions far below zero: the gather's first take raises
            # IndexError before anything is written (cheaper than looking first).
            try:
                batch = gather_batch([window.joined], None, window.shifts[numbers] + indices, out)
            except IndexError:
                pass
            else:
                count_hits(int(np.count_nonzero(np.bincount(numbers))))
                return batch
        rows = self._rows(indices, numbers)
        unique, grouping = split_blocks(numbers, self._block_count)
        if window is not None and window.unique == unique:  # the last batch's blocks
            count_hits(len(unique))
            blocks: list[Columns] | None = window.blocks
        else:
            blocks = self._blocks(unique, len(indices))
        if blocks is None:
            return column_batch(self._direct(indices), out)
        if grouping is not None:
            if window is not None and window.unique == unique and not window.tried:
                # A second batch from the same blocks: join them, once (not lists of
                # numbers: their rows are gathered as views already).
                held = process_cache().bytes_of(self._key, unique)
                small = held is not None and held <= self._cache_bytes // 4
                flat = not any(isinstance(c, Ragged) for c in blocks[0].values())
                joined = join_blocks(blocks) if small and flat else None
                shifts = self._shifts(unique if joined else [])
                self._window = _Window(unique, blocks, joined, shifts, tried=True)
            elif window is None or window.unique != unique:  # seen once
                self._window = _Window(unique, blocks, None, _NONE, tried=False)
        return gather_batch(blocks, grouping, rows, out)

    def _shifts(self, unique: list[int]) -> np.ndarray:
        """Per block, what turns a record's index into its row in the join of the
        blocks ``unique`` (end to end, in that order); ``_ABSENT`` for other blocks."""
        shifts = np.full(self._block_count, _ABSENT, dtype=np.int64)
        sizes = np.diff(self._starts)[unique]
        shifts[unique] = np.concatenate(([0], np.cumsum(sizes)[:-1])) - self._starts[unique]
        return shifts

    def _empty(self) -> Columns:
        """No rows, with the columns' kinds (from the first block)."""
        if self._reads_rows or not self._block_count:
            return self._read_rows(indices=np.zeros(0, dtype=np.int64))
        return take_columns([self._read_block(0)], np.zeros(0, np.int64), np.zeros(0, np.int64))

    def _held_bytes(self) -> int:
        """The bytes of this source's blocks held in this process's decode cache now."""
        return 0 if self._key is None else process_cache().held_bytes(self._key)
