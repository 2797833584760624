"""How the filled path builds a batch: runs of records in, a batch out.

A plan whose dataset may drop records (a filter, ``on_error="skip"``) or packs them
(``sk.pack``) reads records ahead in chunks and hands them, in sampler order, as
:class:`Run` s to a :class:`Filler`: :class:`Records` (the next ``batch_size``
records that pass make a batch) or the dataset's packer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .._context import SKIP

__all__ = ["Filler", "Records", "Run"]


class Run:
    """Records read in sampler order (``SKIP`` for removed ones), their epoch and sample
    indices, and how many of them were handed to batches already (``start``)."""

    __slots__ = ("epoch", "indices", "records", "start")

    def __init__(self, records: Sequence[Any], epoch: int, indices: Sequence[int]) -> None:
        self.records = records
        self.epoch = epoch
        self.indices = indices
        self.start = 0


class Filler(Protocol):
    """Builds the batches of the filled path from records in sampler order.

    ``add_from`` adds the records of a run from ``run.start`` on, in order, until
    one does not fit (it then starts the next batch; a ``SKIP`` is consumed without
    being added), advances ``run.start`` past those taken, and returns True when it
    took the whole run;
    ``full`` is True when no record fits any more; ``take()`` returns the batch's
    items (records or packed rows) and the (epoch, index) of every record consumed,
    and starts a new batch; ``collated`` is then those items as ``default_collate``
    makes them, when the filler built that batch itself (None otherwise).
    """

    @property
    def full(self) -> bool: ...

    @property
    def collated(self) -> Any: ...

    def add_from(self, run: Run) -> bool: ...

    def take(self) -> tuple[Sequence[Any], list[tuple[int, int]]]: ...


class Records:
    """The default filler: the next ``size`` records that pass make a batch."""

    collated = None

    def __init__(self, size: int) -> None:
        self._size = size
        self._records: list[Any] = []
        self._taken: list[tuple[int, int]] = []

    @property
    def full(self) -> bool:
        return len(self._records) >= self._size

    def add_from(self, run: Run) -> bool:
        records, epoch, indices = run.records, run.epoch, run.indices
        k, end = run.start, len(records)
        while k < end and len(self._records) < self._size:
            record = records[k]
            if record is not SKIP:
                self._records.append(record)
                self._taken.append((epoch, indices[k]))
            k += 1
        run.start = k
        return k == end

    def take(self) -> tuple[list[Any], list[tuple[int, int]]]:
        records, taken = self._records, self._taken
        self._records, self._taken = [], []
        return records, taken
