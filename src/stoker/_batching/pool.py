"""``BufferPool``: planned batch memory, recycled only when nothing refers to it.

The first full batch fixes the plan (the structure and every array's shape and
dtype). Later batches are written into the arrays of a free slot instead of fresh
allocations. A slot is free when no reference to any of its arrays exists outside
the pool: a batch the caller still holds, a view of it (``batch["x"][:8]``,
``torch.from_numpy``) or a queue entry all keep it busy, because every NumPy view
refers to its base array. When every slot is busy and the pool is at its cap, the
batch gets fresh memory: a held batch is never overwritten.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np

from .._tree import TreeDef, flatten

__all__ = ["BufferPool"]


def _refs_when_free() -> int:
    slot = [np.empty(1)]
    return sys.getrefcount(slot[0])


_FREE = _refs_when_free()


class BufferPool:
    """Up to ``max_slots`` recycled batches of ``batch_size`` rows.

    Example:
        >>> import numpy as np
        >>> pool = BufferPool(batch_size=2, max_slots=2)
        >>> pool.acquire(2) is None  # no plan before the first batch
        True
        >>> pool.adopt({"x": np.zeros((2, 3))})
        >>> out = pool.acquire(2)
        >>> out["x"].shape
        (2, 3)

    Resources:
        Holds the memory of up to ``max_slots`` batches until it is garbage collected.
    """

    def __init__(self, batch_size: int, max_slots: int) -> None:
        self._batch_size = batch_size
        self._max_slots = max_slots
        self._treedef: TreeDef | None = None
        self._layout: list[tuple[tuple[int, ...], np.dtype[Any]]] = []
        self._slots: list[list[np.ndarray]] = []
        self._lock = threading.Lock()
        self._refused = False  # a full batch had views among its arrays: never planned
        self.recycled = 0
        self.allocated = 0

    @property
    def slots(self) -> int:
        """How many batches of memory the pool holds."""
        return len(self._slots)

    @property
    def planned(self) -> bool:
        """Whether a first full batch fixed the layout of its slots."""
        return self._treedef is not None

    def acquire(self, rows: int) -> Any:
        """A batch-shaped tree of free arrays with ``rows`` rows, or None (allocate)."""
        if self._treedef is None or rows > self._batch_size:
            return None
        refs = sys.getrefcount
        with self._lock:
            for slot in self._slots:
                for leaf in slot:
                    if refs(leaf) != _FREE + 1:  # + 1: ``leaf`` here
                        break
                else:
                    self.recycled += 1
                    leaves = slot if rows == self._batch_size else [a[:rows] for a in slot]
                    return self._treedef.unflatten(leaves)
        return None

    def grow(self, rows: int) -> Any:
        """A new slot of the planned layout, taken as :meth:`acquire` takes one, when
        the pool may hold one more; else None. A batch built into it then needs no
        memory of its own (what :meth:`adopt` would have kept)."""
        if self._treedef is None or rows > self._batch_size:
            return None
        with self._lock:
            if len(self._slots) >= self._max_slots:
                return None
            slot = [np.empty(shape, dtype) for shape, dtype in self._layout]
            self._slots.append(slot)
            self.allocated += 1
            leaves = slot if rows == self._batch_size else [a[:rows] for a in slot]
            return self._treedef.unflatten(leaves)

    def adopt(self, batch: Any) -> None:
        """Offer a freshly allocated batch; the first full one fixes the plan."""
        self.allocated += 1
        if len(self._slots) >= self._max_slots or self._refused:
            return
        leaves, treedef = flatten(batch)
        if not leaves or any(leaf.ndim == 0 for leaf in leaves):
            return
        layout = [(leaf.shape, leaf.dtype) for leaf in leaves]
        if any(shape[0] != self._batch_size for shape, _ in layout):
            return
        if any(leaf.base is not None for leaf in leaves):
            # Views (columns of one array, say) cannot be told free by their own
            # references: such batches keep fresh memory, and are not looked at again.
            self._refused = self._treedef is None
            return
        with self._lock:
            if self._treedef is None:
                self._treedef, self._layout = treedef, layout
            elif treedef != self._treedef or layout != self._layout:
                return
            if len(self._slots) < self._max_slots:
                self._slots.append(leaves)
