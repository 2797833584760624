"""``BlockStore``: blocks of consecutive rows kept side by side, gathered with one take.

``from_sqlite`` reads a batch whose rows fall in a few blocks of consecutive records
(a sequential read, a block-aligned shuffle) by reading each block it touches whole,
once. The store keeps those blocks in two 2-D arrays: the numbers (int64 and float64
columns side by side, as 8-byte words) and the objects (``str`` and ``bytes``
columns), one block to a slot of ``block_rows`` rows. A batch is then one ``take``
per array, whatever the number of blocks it touches, instead of a gather and a
scatter per block and column.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from .block_gather import which_blocks
from .columns import Column, columns_nbytes
from .decode_cache import count_decode, count_hits

__all__ = ["BlockStore"]

_NUMBERS = {"int": np.dtype(np.int64), "float": np.dtype(np.float64)}
_ABSENT = -(1 << 62)
"""The offset of a block not held: any record's position plus it is negative."""


class BlockStore:
    """Blocks of ``block_rows`` consecutive records, read by ``read(block)`` on demand
    and kept, least recently used out first, within ``budget`` bytes.

    ``read(block)`` returns the block's columns in order: int64 and float64 arrays for
    the ``"int"`` and ``"float"`` kinds, lists for ``"str"`` and ``"bytes"``.
    :meth:`gather` returns the same kinds of columns for any rows.

    Example:
        >>> import numpy as np
        >>> def read(block):
        ...     rows = np.arange(block * 4, min(block * 4 + 4, 10))
        ...     return [rows, rows / 2, [f"r{i}" for i in rows]]
        >>> store = BlockStore(["int", "float", "str"], 4, 10, budget=1 << 20, read=read)
        >>> store.held(np.array([9, 0])) is None  # nothing read yet
        True
        >>> ints, floats, texts = store.gather(np.array([9, 0, 5]))
        >>> ints.tolist(), floats.tolist(), texts, store.reads
        ([9, 0, 5], [4.5, 0.0, 2.5], ['r9', 'r0', 'r5'], 3)
        >>> [c.tolist() if hasattr(c, "tolist") else c for c in store.held(np.array([1]))]
        [[1], [0.5], ['r1']]

    Resources:
        No thread of its own: whichever thread asks for a missing block reads it (a
        thread that needs a block another is reading waits for that read, woken when
        it ends, whether it succeeded or failed). The blocks it keeps take at most
        ``budget`` bytes between batches; the blocks of the batches being gathered
        are kept whatever their size until they are gathered.

    Errors:
        An exception of ``read`` reaches the batch that read the block; a batch that
        was waiting for that block then reads it itself (and gets its own error).
    """

    def __init__(
        self,
        kinds: Sequence[str],
        block_rows: int,
        length: int,
        budget: int,
        read: Callable[[int], list[Column]],
    ) -> None:
        self._block_rows = block_rows
        self._read = read
        self._budget = budget
        self._kinds = list(kinds)
        self._where: list[int] = []  # column -> its position in the numbers or the objects
        numbers = objects = 0
        for kind in self._kinds:
            if kind in _NUMBERS:
                self._where.append(numbers)
                numbers += 1
            else:
                self._where.append(objects)
                objects += 1
        self._numbers = np.empty((0, numbers), dtype=np.int64)
        self._objects = np.empty((0, objects), dtype=object)
        self._lock = threading.Lock()
        blocks = -(-length // block_rows)
        # block -> (its slot - itself) * block_rows: record i of a held block is at
        # row i + offset[i // block_rows] of the arrays.
        self._offset = np.full(blocks, _ABSENT, dtype=np.int64)
        self._used = np.zeros(blocks, dtype=np.int64)  # block -> when it was last gathered
        self._seen = np.zeros(blocks, dtype=bool)  # block -> read before (for the stats)
        self._clock = 0
        self._pins: list[int] = []  # slot -> batches gathering from it now
        self._sizes: list[int] = []  # slot -> bytes of its block
        self._owner: list[int] = []  # slot -> its block, -1: free
        self._free: list[int] = []
        self._held_bytes = 0
        self._reading: dict[int, threading.Event] = {}  # block -> set when its read ends
        self.reads = 0
        """Blocks read so far (misses)."""

    def held(self, indices: np.ndarray) -> list[Column] | None:
        """The columns of records ``indices`` if every block they fall in is held,
        else None (nothing is read)."""
        numbers = indices // self._block_rows
        with self._lock:
            positions = self._offset[numbers]
            positions += indices
            if len(positions) and positions.min() < 0:
                return None
            taken = self._take(positions, numbers)
        count_hits(len(which_blocks(numbers)[0]))
        return taken

    def gather(self, indices: np.ndarray) -> list[Column]:
        """The columns of records ``indices`` (int64), in that order; the blocks they
        fall in are read first where they are not held."""
        blocks, _ = which_blocks(indices // self._block_rows)
        wanted = blocks.tolist()
        self._pin(wanted)
        try:
            with self._lock:
                numbers = indices // self._block_rows
                return self._take(self._offset[numbers] + indices, numbers)
        finally:
            self._unpin(wanted)

    def _take(self, positions: np.ndarray, numbers: np.ndarray) -> list[Column]:
        """The columns at rows ``positions`` of the arrays (under the lock)."""
        self._clock += 1
        self._used[numbers] = self._clock
        numbers_taken = self._numbers.take(positions, axis=0)
        objects_taken = self._objects.take(positions, axis=0) if self._objects.shape[1] else None
        columns: list[Column] = []
        for kind, j in zip(self._kinds, self._where, strict=True):
            dtype = _NUMBERS.get(kind)
            if dtype is not None:
                columns.append(numbers_taken[:, j].view(dtype))
            elif objects_taken is not None:
                columns.append(objects_taken[:, j].tolist())
        return columns

    def _pin(self, wanted: list[int]) -> None:
        """Hold every block of ``wanted`` (reading those missing) until :meth:`_unpin`."""
        size = self._block_rows
        pinned: list[int] = []
        todo = wanted
        try:
            while todo:
                mine: list[int] = []
                waits: list[threading.Event] = []
                later: list[int] = []
                with self._lock:
                    for block in todo:
                        offset = int(self._offset[block])
                        if offset != _ABSENT:
                            self._pins[offset // size + block] += 1
                            pinned.append(block)
                            count_hits(1)
                        elif block in self._reading:
                            waits.append(self._reading[block])
                            later.append(block)  # look again once it is read
                        else:
                            self._reading[block] = threading.Event()
                            mine.append(block)
                self._read_into(mine, pinned)
                for event in waits:
                    event.wait()
                todo = later
        except BaseException:
            self._unpin(pinned)
            raise

    def _read_into(self, blocks: list[int], pinned: list[int]) -> None:
        """Read ``blocks`` (claimed by this thread) and keep them, pinned."""
        done = 0
        try:
            for block in blocks:
                columns = self._read(block)
                nbytes = columns_nbytes({str(k): c for k, c in enumerate(columns)})
                count_decode(nbytes, again=bool(self._seen[block]))
                self._seen[block] = True
                with self._lock:
                    slot = self._install(block, columns, nbytes)
                    self._pins[slot] += 1
                    pinned.append(block)
                    self._reading.pop(block).set()
                done += 1
        finally:
            if done < len(blocks):  # a read failed: whoever waits for the rest reads them
                with self._lock:
                    for block in blocks[done:]:
                        self._reading.pop(block).set()

    def _install(self, block: int, columns: list[Column], nbytes: int) -> int:
        """Put a block just read in a slot (under the lock); return the slot."""
        self._trim(nbytes)
        slot = self._free.pop() if self._free else self._grow(nbytes)
        start = slot * self._block_rows
        stop = start + len(columns[0])
        for kind, j, column in zip(self._kinds, self._where, columns, strict=True):
            if kind in _NUMBERS:
                self._numbers[start:stop, j] = np.asarray(column).view(np.int64)
            else:
                self._objects[start:stop, j] = column
        self._offset[block] = start - block * self._block_rows
        self._owner[slot] = block
        self._sizes[slot] = nbytes
        self._held_bytes += nbytes
        self.reads += 1
        return slot

    def _grow(self, nbytes: int) -> int:
        """More slots: as many blocks of ``nbytes`` as the budget holds, or twice as
        many as now (at most one per block); return a new free slot."""
        slots = len(self._pins)
        fit = self._budget // max(nbytes, 1)
        more = min(max(2 * slots, fit, slots + 1), len(self._offset)) - slots
        rows = (slots + more) * self._block_rows
        for name in ("_numbers", "_objects"):
            old = getattr(self, name)
            new = np.empty((rows, old.shape[1]), dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        self._pins.extend([0] * more)
        self._sizes.extend([0] * more)
        self._owner.extend([-1] * more)
        self._free.extend(range(slots + more - 1, slots, -1))
        return slots

    def _unpin(self, blocks: list[int]) -> None:
        size = self._block_rows
        with self._lock:
            for block in blocks:
                self._pins[int(self._offset[block]) // size + block] -= 1
            self._trim(0)

    def _trim(self, extra: int) -> None:
        """Drop the least recently used unpinned blocks while the held ones and
        ``extra`` bytes exceed the budget (under the lock)."""
        while self._held_bytes and self._held_bytes + extra > self._budget:
            idle = [s for s, b in enumerate(self._owner) if b >= 0 and not self._pins[s]]
            if not idle:
                return
            slot = min(idle, key=lambda s: int(self._used[self._owner[s]]))
            block = self._owner[slot]
            self._offset[block] = _ABSENT
            self._owner[slot] = -1
            self._held_bytes -= self._sizes[slot]
            start = slot * self._block_rows
            self._objects[start : start + self._block_rows] = None  # let go of its strings
            self._free.append(slot)
