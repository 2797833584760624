"""``BlockStore``: blocks of consecutive rows kept side by side, gathered with one take.

``from_sqlite`` reads a batch whose rows fall in a few blocks of consecutive records
(a sequential read, a block-aligned shuffle) by reading each block it touches whole,
once. The store keeps those blocks in a few 2-D arrays, one per group of columns
(int64 columns side by side, float64 columns side by side, ``str`` and ``bytes``
columns in one object array), one block to a slot of ``block_rows`` rows. A batch
spread over several blocks is then gathered with one ``take`` per group, whatever
the number of blocks it touches, instead of a gather and a scatter per block and
column.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .columns import Column, columns_nbytes, which_blocks

__all__ = ["BlockStore"]

_GROUPS = {"int": "int", "float": "float", "str": "object", "bytes": "object"}
_DTYPES: dict[str, Any] = {"int": np.int64, "float": np.float64, "object": object}


class BlockStore:
    """Blocks of ``block_rows`` consecutive records, read by ``read(block)`` on demand
    and kept, least recently used first out, within ``budget`` bytes.

    ``read(block)`` returns the block's columns in order: int64 and float64 arrays for
    the ``"int"`` and ``"float"`` kinds, lists for ``"str"`` and ``"bytes"``.
    :meth:`gather` returns the same kinds of columns for any rows.

    Example:
        >>> import numpy as np
        >>> def read(block):
        ...     rows = np.arange(block * 4, min(block * 4 + 4, 10))
        ...     return [rows, rows / 2, [f"r{i}" for i in rows]]
        >>> store = BlockStore(["int", "float", "str"], 4, 10, budget=1 << 20, read=read)
        >>> ints, floats, texts = store.gather(np.array([9, 0, 5]))
        >>> ints.tolist(), floats.tolist(), texts, store.reads
        ([9, 0, 5], [4.5, 0.0, 2.5], ['r9', 'r0', 'r5'], 3)

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
        groups: dict[str, int] = {}
        self._where: list[tuple[str, int]] = []  # column -> (its group, position in it)
        for kind in kinds:
            group = _GROUPS[kind]
            self._where.append((group, groups.get(group, 0)))
            groups[group] = groups.get(group, 0) + 1
        self._widths = groups
        self._arrays: dict[str, np.ndarray] = {
            g: np.empty((0, w), dtype=_DTYPES[g]) for g, w in groups.items()
        }
        self._lock = threading.Lock()
        blocks = -(-length // block_rows)
        self._slot = np.full(blocks, -1, dtype=np.int64)  # block -> its slot, -1: not held
        self._pins: list[int] = []  # slot -> batches gathering from it now
        self._sizes: list[int] = []  # slot -> bytes of its block
        self._free: list[int] = []
        self._held: OrderedDict[int, None] = OrderedDict()  # blocks held, oldest use first
        self._held_bytes = 0
        self._reading: dict[int, threading.Event] = {}  # block -> set when its read ends
        self.reads = 0
        """Blocks read so far (misses)."""

    def gather(self, indices: np.ndarray) -> list[Column]:
        """The columns of records ``indices`` (int64), in that order."""
        size = self._block_rows
        numbers = indices // size
        blocks, block_of = which_blocks(numbers)
        wanted = blocks.tolist()
        self._pin(wanted)
        try:
            with self._lock:
                positions = self._slot[blocks][block_of]
                positions *= size
                positions += indices - numbers * size
                taken = {g: a.take(positions, axis=0) for g, a in self._arrays.items()}
        finally:
            self._unpin(wanted)
        columns: list[Column] = []
        for group, j in self._where:
            column = taken[group][:, j]
            columns.append(column.tolist() if group == "object" else column)
        return columns

    def _pin(self, wanted: list[int]) -> None:
        """Hold every block of ``wanted`` (reading those missing) until :meth:`_unpin`."""
        pinned: list[int] = []
        todo = wanted
        try:
            while todo:
                mine: list[int] = []
                waits: list[threading.Event] = []
                later: list[int] = []
                with self._lock:
                    for block in todo:
                        slot = int(self._slot[block])
                        if slot >= 0:
                            self._pins[slot] += 1
                            self._held.move_to_end(block)
                            pinned.append(block)
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
        slot = self._free.pop() if self._free else self._grow()
        start = slot * self._block_rows
        rows = len(columns[0])
        for (group, j), column in zip(self._where, columns, strict=True):
            self._arrays[group][start : start + rows, j] = column
        self._slot[block] = slot
        self._sizes[slot] = nbytes
        self._held[block] = None
        self._held_bytes += nbytes
        self.reads += 1
        return slot

    def _grow(self) -> int:
        """Twice the slots (at most one per block); return a new free slot."""
        slots = len(self._pins)
        more = min(max(2 * slots, 4), len(self._slot)) - slots
        rows = (slots + more) * self._block_rows
        for group, old in self._arrays.items():
            new = np.empty((rows, self._widths[group]), dtype=_DTYPES[group])
            new[: len(old)] = old
            self._arrays[group] = new
        self._pins.extend([0] * more)
        self._sizes.extend([0] * more)
        self._free.extend(range(slots + more - 1, slots, -1))
        return slots

    def _unpin(self, blocks: list[int]) -> None:
        with self._lock:
            for block in blocks:
                self._pins[int(self._slot[block])] -= 1
            self._trim(0)

    def _trim(self, extra: int) -> None:
        """Drop the oldest unpinned blocks while the held ones and ``extra`` bytes
        exceed the budget (under the lock)."""
        while self._held and self._held_bytes + extra > self._budget:
            victim = next((b for b in self._held if self._pins[int(self._slot[b])] == 0), None)
            if victim is None:
                return
            slot = int(self._slot[victim])
            self._slot[victim] = -1
            del self._held[victim]
            self._held_bytes -= self._sizes[slot]
            objects = self._arrays.get("object")
            if objects is not None:  # let go of its strings now
                start = slot * self._block_rows
                objects[start : start + self._block_rows] = None
            self._free.append(slot)
