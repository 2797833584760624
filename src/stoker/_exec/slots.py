"""Batch slots in shared memory: process workers collate into them, the parent reads views.

The parent owns a ring of :class:`~stoker._shm.Segment` slots, each big enough
for one batch. A job sent to a worker names a free slot; the worker builds the batch
straight into it (``SlotWriter`` is the worker's buffer pool) and sends back only
the layout: the structure and, per array, (offset, shape, dtype). The parent turns
that into NumPy views of the slot, with no copy.

A slot is free when no job is writing it and no view of it is alive: every view
refers to the slot's base array, so its reference count tells. When all slots are
busy and the ring is at its cap, the job gets no slot and the batch travels through
the pipe instead (a copy): a batch the caller holds is never overwritten.

Descriptors: a worker attaches a slot through the parent's descriptor table
(``/proc/<parent>/fd/N``) when it starts a job that names it, so the ring keeps every
slot that a job names open until that job is over (:meth:`SlotRing.release`, after
its result or its worker's death); only then may a slot be retired and its
descriptor number reused. The first batches, built before the parent knows the slot
size, go the other way in segments of their worker's own; those are passed with the
message (``send_with_segment``), never looked up in the worker's table.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._shm import Segment, SegmentHandle, attach
from .._tree import TreeDef, flatten

__all__ = ["Layout", "SlotRef", "SlotRing", "SlotWriter", "layout_of", "plan_offsets", "views"]

_ALIGN = 64
_PAGE = 4096

Layout = tuple[TreeDef, tuple[tuple[int, tuple[int, ...], np.dtype[Any]], ...]]
"""A batch's structure and, per array leaf, (byte offset, shape, dtype)."""


@dataclass(frozen=True, slots=True)
class SlotRef:
    """A slot as a job names it: its number and how to attach it."""

    id: int
    handle: SegmentHandle


def plan_offsets(sizes: list[int]) -> tuple[list[int], int]:
    """Where arrays of ``sizes`` bytes lie one after the other in a slot (each aligned
    to 64 bytes), and the bytes they take.

    Example:
        >>> plan_offsets([10, 100, 1])
        ([0, 64, 192], 193)
    """
    offsets, end = [], 0
    for size in sizes:
        end = -(-end // _ALIGN) * _ALIGN
        offsets.append(end)
        end += size
    return offsets, end


def layout_of(batch: Any) -> tuple[TreeDef, list[np.ndarray]] | None:
    """The structure and array leaves of ``batch`` when it can live in a slot, else None.

    Only batches made entirely of NumPy arrays of plain (non-object) dtypes can.
    """
    leaves, treedef = flatten(batch)
    if not leaves or _has_other_leaves(treedef):
        return None
    if any(leaf.dtype.hasobject for leaf in leaves):
        return None
    return treedef, leaves


def _has_other_leaves(treedef: TreeDef) -> bool:
    if treedef.kind == "leaf":
        return True
    return any(_has_other_leaves(child) for child in treedef.children)


def views(base: np.ndarray, layout: Layout) -> Any:
    """The batch ``layout`` describes, as views of the bytes ``base``."""
    treedef, leaves = layout
    arrays = []
    for offset, shape, dtype in leaves:
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        arrays.append(base[offset : offset + nbytes].view(dtype).reshape(shape))
    return treedef.unflatten(arrays)


class _Slot:
    __slots__ = ("free_refs", "id", "in_use", "segment")

    def __init__(self, slot_id: int, size: int) -> None:
        self.id = slot_id
        self.segment = Segment(size, f"batch-{slot_id}")
        self.in_use = False
        self.free_refs = sys.getrefcount(self.segment.array)

    def is_free(self) -> bool:
        return not self.in_use and sys.getrefcount(self.segment.array) <= self.free_refs


class SlotRing:
    """The parent's slots: up to ``cap`` batches of shared memory.

    Example:
        >>> ring = SlotRing(cap=2)
        >>> ring.acquire() is None  # the slot size is learned from the first batch
        True
        >>> ring.note_size(1000)
        >>> ref = ring.acquire()
        >>> ref.handle.size
        4096
        >>> ring.close()

    Resources:
        Owns every slot's segment; :meth:`close` (idempotent) releases them. Views
        handed out stay valid after it (the memory goes with the last view).
    """

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._size = 0
        self._slots: dict[int, _Slot] = {}
        self._next_id = 0
        self._lock = threading.Lock()
        self._retired: list[int] = []
        self.copied = 0  # batches that could not get a slot

    def note_size(self, nbytes: int) -> None:
        """A batch of ``nbytes`` was seen: slots from now on hold at least that."""
        size = max(_PAGE, -(-nbytes // _PAGE) * _PAGE)
        with self._lock:
            self._size = max(self._size, size)

    def acquire(self) -> SlotRef | None:
        """A free slot for a job (now in use), or None when the batch must be copied."""
        with self._lock:
            if self._size == 0:
                return None
            for slot in list(self._slots.values()):
                if slot.segment.size < self._size:
                    if slot.is_free():  # too small for today's batches: retire it
                        del self._slots[slot.id]
                        slot.segment.close()
                        self._retired.append(slot.id)
                    continue
                if slot.is_free():
                    slot.in_use = True
                    return SlotRef(slot.id, slot.segment.handle)
            if len(self._slots) >= self._cap:
                self.copied += 1
                return None
            slot = _Slot(self._next_id, self._size)
            self._next_id += 1
            self._slots[slot.id] = slot
            slot.in_use = True
            return SlotRef(slot.id, slot.segment.handle)

    @property
    def sized(self) -> bool:
        """True once the slot size is known (a batch has been seen)."""
        return self._size > 0

    def take_retired(self) -> list[int]:
        """Slot numbers retired since the last call (workers unmap them)."""
        with self._lock:
            retired, self._retired = self._retired, []
        return retired

    def release(self, ref: SlotRef) -> None:
        """The job writing ``ref`` is over (views of it may still keep it busy)."""
        with self._lock:
            slot = self._slots.get(ref.id)
            if slot is not None:
                slot.in_use = False

    def view(self, ref: SlotRef, layout: Layout) -> Any:
        """The batch a worker wrote into ``ref``, as views of the slot."""
        return views(self._slots[ref.id].segment.array, layout)

    def close(self) -> None:
        """Release every slot's segment (idempotent)."""
        with self._lock:
            slots, self._slots = list(self._slots.values()), {}
        for slot in slots:
            slot.segment.close()


class SlotWriter:
    """A worker's buffer pool: batches are built straight into the job's slot.

    It offers the interface of :class:`~stoker._batching.pool.BufferPool` that the
    batch builder uses (``acquire``, ``adopt``, ``slots``, counters).

    Resources:
        Maps the slots it is asked to write; :meth:`forget` unmaps retired ones.
    """

    def __init__(self, batch_size: int) -> None:
        self._batch_size = batch_size
        self._mapped: dict[int, Segment] = {}
        self._current: Segment | None = None
        self._plan: tuple[TreeDef, list[tuple[int, tuple[int, ...], np.dtype[Any]]]] | None = None
        self.recycled = 0
        self.allocated = 0

    @property
    def slots(self) -> int:
        return 0  # never split gathers in a worker

    @property
    def planned(self) -> bool:
        """Whether a first full batch fixed the layout of the batches."""
        return self._plan is not None

    def use(self, ref: SlotRef | None) -> None:
        """Write the next batch into ``ref`` (None: no slot, the batch is sent by copy).

        The parent holds ``ref``'s segment open until this job is over, so it can be
        attached by its descriptor number here.
        """
        if ref is None:
            self._current = None
            return
        segment = self._mapped.get(ref.id)
        if segment is None:
            segment = self._mapped[ref.id] = attach(ref.handle)
        self._current = segment

    def forget(self, ids: list[int]) -> None:
        for slot_id in ids:
            segment = self._mapped.pop(slot_id, None)
            if segment is not None:
                segment.close()

    def acquire(self, rows: int) -> Any:
        """Views of the current slot shaped like a batch of ``rows`` rows, or None."""
        if self._current is None or self._plan is None or rows > self._batch_size:
            return None
        treedef, leaves = self._plan
        end = leaves[-1][0] + int(np.prod(leaves[-1][1])) * leaves[-1][2].itemsize
        if end > self._current.size:
            return None
        base = self._current.array
        out = []
        for offset, shape, dtype in leaves:
            full = base[offset : offset + int(np.prod(shape)) * dtype.itemsize]
            out.append(full.view(dtype).reshape(shape)[:rows])
        self.recycled += 1
        return treedef.unflatten(out)

    def grow(self, rows: int) -> Any:
        """None: the parent hands out the slots (a batch without one is sent by copy)."""
        return None

    def adopt(self, batch: Any) -> None:
        """Learn the layout from the first full batch (built in private memory)."""
        self.allocated += 1
        if self._plan is not None:
            return
        found = layout_of(batch)
        if found is None:
            return
        treedef, leaves = found
        if any(leaf.ndim == 0 or leaf.shape[0] != self._batch_size for leaf in leaves):
            return
        offsets, _ = plan_offsets([leaf.nbytes for leaf in leaves])
        self._plan = (
            treedef,
            [(off, leaf.shape, leaf.dtype) for off, leaf in zip(offsets, leaves, strict=True)],
        )

    def export(self, batch: Any, own: bool) -> tuple[Layout | None, int, Segment | None]:
        """Place ``batch`` in shared memory: its layout, size, and segment if not the slot.

        A batch built into the slot already is described as it lies; any other batch
        of plain arrays that fits is copied in once. With ``own``, a batch without a
        slot that fits (the first ones, before the parent knows the size) gets a
        segment of its own, which the caller owns: it passes the segment with the
        layout (``send_with_segment``), then closes it. Otherwise the layout is None
        and the batch is sent by copy.
        """
        found = layout_of(batch)
        if found is None:
            return None, 0, None
        treedef, leaves = found
        offsets, total = plan_offsets([leaf.nbytes for leaf in leaves])
        segment = self._current
        if segment is not None and total <= segment.size:
            base = segment.array
            start = base.__array_interface__["data"][0]
            inside = [
                leaf.flags.c_contiguous
                and 0 <= leaf.__array_interface__["data"][0] - start < segment.size
                and np.shares_memory(leaf, base)
                for leaf in leaves
            ]
            if all(inside):  # built in place
                described = tuple(
                    (leaf.__array_interface__["data"][0] - start, leaf.shape, leaf.dtype)
                    for leaf in leaves
                )
                return (treedef, described), total, None
            if not any(inside):
                return (treedef, _copy_into(base, leaves, offsets)), total, None
        if not own:
            return None, total, None
        segment = Segment(max(total, 1), "batch")
        try:
            described = _copy_into(segment.array, leaves, offsets)
        except BaseException:
            segment.close()
            raise
        return (treedef, described), total, segment


def _copy_into(
    base: np.ndarray, leaves: list[np.ndarray], offsets: list[int]
) -> tuple[tuple[int, tuple[int, ...], np.dtype[Any]], ...]:
    for leaf, offset in zip(leaves, offsets, strict=True):
        target = base[offset : offset + leaf.nbytes].view(leaf.dtype).reshape(leaf.shape)
        np.copyto(target, leaf)
    return tuple(
        (offset, leaf.shape, leaf.dtype) for leaf, offset in zip(leaves, offsets, strict=True)
    )
