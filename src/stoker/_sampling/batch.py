"""``BatchSampler``: an epoch's order cut into batches, with the last one kept, dropped
or rolled over into the next epoch.

Under ``last_batch="rollover"`` the indices left over at the end of an epoch start the
next one, so every index of every epoch reaches a batch. The carry into epoch ``e`` is
a pure function of ``e``: the last ``(e * len(sampler)) % batch_size`` indices of the
stream of epochs ``0 .. e - 1``, as if every epoch before ``e`` had been run in turn.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, Sized
from typing import Any, Literal, cast

import numpy as np

from .._state import check_fields, state_int
from ..errors import ConfigError, StateError
from .base import (
    IndexArray,
    Sampler,
    SamplerCursor,
    check_int,
)
from .sequential import SequentialSampler
from .stateful import EpochStateful

__all__ = ["BatchCursor", "BatchSampler", "LastBatch"]

LastBatch = Literal["keep", "drop", "rollover"]
_CHOICES: tuple[LastBatch, ...] = ("keep", "drop", "rollover")


class BatchCursor:
    """An open position in one epoch's batches.

    Made by :meth:`BatchSampler.batch_cursor` or :meth:`BatchSampler.restore`.

    Example:
        >>> from stoker import BatchSampler
        >>> cursor = BatchSampler(5, batch_size=2, last_batch="rollover").batch_cursor(0)
        >>> cursor.next_batch().tolist(), cursor.next_batch().tolist(), cursor.next_batch()
        ([0, 1], [2, 3], None)
        >>> cursor.carry_out()
        [4]

    Errors:
        RuntimeError: ``carry_out()`` before the epoch has ended.
        StateError: ``restore`` with a state that does not fit the batch sampler.
    """

    def __init__(
        self,
        owner: BatchSampler,
        cursor: SamplerCursor,
        carry: list[int],
        carry_out: list[int] | None = None,
    ) -> None:
        self._owner = owner
        self._cursor = cursor
        self._carry = carry
        self._carry_out = carry_out
        self._done = carry_out is not None and len(carry_out) > 0

    @property
    def epoch(self) -> int:
        """The epoch this cursor walks."""
        return self._cursor.epoch

    @property
    def position(self) -> int:
        """How many of the epoch's own indices (not counting the carry) were taken."""
        return self._cursor.position

    def next_batch(self) -> IndexArray | None:
        """Return the next batch's indices, or ``None`` once the epoch has no more batches."""
        if self._done:
            return None
        size = self._owner.batch_size
        fresh = self._cursor.take(size - len(self._carry))
        if self._carry:
            batch = np.concatenate([np.asarray(self._carry, dtype=np.int64), fresh])
            self._carry = []
        else:
            batch = fresh
        if batch.size == size:
            return batch
        self._done = True
        mode = self._owner.last_batch
        if mode == "rollover":
            self._carry_out = batch.tolist()
        elif mode == "keep" and batch.size:
            return batch
        return None

    def carry_out(self) -> list[int]:
        """The indices left at the end of the epoch, which start the next one.

        Always empty unless ``last_batch="rollover"``.

        Errors:
            RuntimeError: the epoch has not ended (``next_batch()`` has not returned
                ``None`` yet).
        """
        if not self._done:
            raise RuntimeError(
                "carry_out() is known once the epoch has ended: call next_batch() until "
                "it returns None first"
            )
        return list(self._carry_out or [])

    def state_dict(self) -> dict[str, Any]:
        """Return this cursor's position as a dict of JSON types.

        ``"carry"`` holds the indices carried into this epoch that no batch has yet
        included; ``"carry_out"`` the leftover indices once the epoch has ended under
        rollover; ``"sampler"`` the state of the underlying sampler cursor.
        """
        owner = self._owner
        return {
            "kind": "BatchSampler",
            "batch_size": owner.batch_size,
            "last_batch": owner.last_batch,
            "epoch": self.epoch,
            "position": self.position,
            "carry": list(self._carry),
            "carry_out": list(self._carry_out or []) if self._done else [],
            "sampler": self._cursor.state_dict(),
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Move this cursor to ``state``, as saved by ``state_dict()``.

        Errors:
            StateError: as for :meth:`BatchSampler.restore`.
        """
        other = self._owner.restore(state)
        self._cursor = other._cursor
        self._carry = other._carry
        self._carry_out = other._carry_out
        self._done = other._done

    def __repr__(self) -> str:
        return f"<batch cursor of {self._owner!r} at epoch {self.epoch}, position {self.position}>"


def _looks_like_foreign_sampler(obj: object) -> bool:
    return isinstance(obj, Iterable) and not hasattr(obj, "__getitem__")


class BatchSampler(EpochStateful[BatchCursor]):
    """Cuts a sampler's epochs into batches of ``batch_size`` indices.

    ``last_batch`` decides the end of an epoch whose length is not a multiple of
    ``batch_size``: ``"keep"`` yields the short last batch, ``"drop"`` leaves it out,
    ``"rollover"`` puts its indices at the head of the next epoch's first batch.

    Iterating yields lists of ints, like ``torch.utils.data.BatchSampler``; it walks
    the epoch given to ``set_epoch`` (0 until set) and follows the same stateful
    protocol as :class:`Sampler`. Under rollover the carry into an epoch is computed
    as if all earlier epochs had run in turn (see :meth:`carry_into`), so iteration
    is a pure function of the epoch. The loader uses :meth:`batch_cursor` instead and
    passes each epoch's ``carry_out()`` on itself.

    Args:
        sampler: a stoker sampler, or an int or sized object (a dataset), which means
            ``SequentialSampler(sampler)``. Wrap samplers of other libraries in
            ``ForeignSampler`` first.
        batch_size: indices per batch, an int >= 1.
        last_batch: ``"keep"``, ``"drop"`` or ``"rollover"``.

    Example:
        >>> from stoker import BatchSampler
        >>> list(BatchSampler(5, batch_size=2))
        [[0, 1], [2, 3], [4]]
        >>> list(BatchSampler(5, batch_size=2, last_batch="drop"))
        [[0, 1], [2, 3]]

    Errors:
        ConfigError: ``batch_size`` is not an int >= 1, ``last_batch`` is not one of
            the choices, or ``sampler`` is none of the accepted kinds.
        StateError: ``restore`` or ``load_state_dict`` with a state from a batch sampler
            with another batch size, ``last_batch`` or sampler.
    """

    _last: BatchCursor | None = None

    def __init__(
        self, sampler: Sampler | int | Sized, batch_size: int, last_batch: LastBatch = "keep"
    ) -> None:
        if isinstance(sampler, BatchSampler):
            raise ConfigError("sampler is already a BatchSampler: pass its sampler instead")
        if isinstance(sampler, Sampler):
            self._sampler: Sampler = sampler
        elif isinstance(sampler, Sized) and _looks_like_foreign_sampler(sampler):
            raise ConfigError(
                f"{type(sampler).__name__} looks like a sampler from another library: wrap it "
                "as ForeignSampler(sampler, source_len=len(dataset)) so its indices are used"
            )
        elif isinstance(sampler, int | Sized):
            self._sampler = SequentialSampler(sampler)
        else:
            raise ConfigError(
                "sampler must be a stoker Sampler, an int or a sized dataset, "
                f"got {type(sampler).__name__}"
            )
        self._batch_size = check_int(batch_size, "batch_size", minimum=1)
        if last_batch not in _CHOICES:
            raise ConfigError(
                f"last_batch must be one of {', '.join(map(repr, _CHOICES))}, got {last_batch!r}"
            )
        self._last_batch: LastBatch = last_batch

    @property
    def sampler(self) -> Sampler:
        """The sampler whose epochs are cut into batches."""
        return self._sampler

    @property
    def source_len(self) -> int:
        """The size of the underlying sampler's index space."""
        return self._sampler.source_len

    @property
    def batch_size(self) -> int:
        """Indices per batch."""
        return self._batch_size

    @property
    def last_batch(self) -> LastBatch:
        """What happens to a short last batch: ``"keep"``, ``"drop"`` or ``"rollover"``."""
        return self._last_batch

    def num_batches(self, epoch: int) -> int:
        """Return the number of batches of ``epoch``.

        Under rollover, the batches that end within ``epoch`` given the carry from the
        epochs before it run in turn.

        Errors:
            ConfigError: ``epoch`` is not an int >= 0.
        """
        epoch = check_int(epoch, "epoch", minimum=0)
        length, size = len(self._sampler), self._batch_size
        if self._last_batch == "keep":
            return -(-length // size)
        if self._last_batch == "drop":
            return length // size
        return ((epoch * length) % size + length) // size

    def __len__(self) -> int:
        return self.num_batches(self._epoch)

    def carry_into(self, epoch: int) -> list[int]:
        """Return the indices that rollover carries into ``epoch``.

        They are the last ``(epoch * len(sampler)) % batch_size`` indices of the
        stream of epochs ``0 .. epoch - 1``; empty unless ``last_batch="rollover"``.

        Errors:
            ConfigError: ``epoch`` is not an int >= 0.
        """
        epoch = check_int(epoch, "epoch", minimum=0)
        if self._last_batch != "rollover":
            return []
        length = len(self._sampler)
        missing = (epoch * length) % self._batch_size
        parts: list[IndexArray] = []
        earlier = epoch - 1
        while missing > 0:
            count = min(missing, length)
            parts.append(self._sampler.cursor(earlier, length - count).take(count))
            missing -= count
            earlier -= 1
        return np.concatenate(parts[::-1]).tolist() if parts else []

    def _check_carry(self, carry: Iterable[int], error: type[ValueError]) -> list[int]:
        try:
            values = [operator.index(i) for i in carry]
        except TypeError:
            raise error(f"a carry must be a sequence of int indices, got {carry!r}") from None
        if values and self._last_batch != "rollover":
            raise error(f"only last_batch='rollover' carries indices, got carry {values}")
        if len(values) >= self._batch_size:
            raise error(
                f"a carry holds fewer than batch_size={self._batch_size} indices, got {len(values)}"
            )
        limit = self.source_len
        for i in values:
            if not 0 <= i < limit:
                raise error(f"carried index {i} is outside [0, {limit})")
        return values

    def batch_cursor(self, epoch: int, position: int = 0, carry: Iterable[int] = ()) -> BatchCursor:
        """Open ``epoch``'s batches at sampler position ``position``.

        Args:
            epoch: the epoch, >= 0.
            position: how many of the epoch's own indices are already in batches.
            carry: under rollover, the previous epoch's ``carry_out()``, which heads the
                first batch.

        Errors:
            ConfigError: ``epoch`` or ``position`` out of range, or a carry that is not
                valid for this batch sampler.
        """
        values = self._check_carry(carry, ConfigError)
        return BatchCursor(self, self._sampler.cursor(epoch, position), values)

    def restore(self, state: Mapping[str, Any]) -> BatchCursor:
        """Reopen the batch cursor that saved ``state``.

        Errors:
            StateError: a state from a batch sampler with another batch size,
                ``last_batch`` or sampler, or with inconsistent fields.
        """
        checked = self._check_state(state)
        if "sampler" not in checked:
            raise StateError(f"the state has no 'sampler' field, so {self!r} cannot restore it")
        cursor = self._sampler.restore(checked["sampler"])
        epoch = state_int(checked, "epoch", self)
        position = state_int(checked, "position", self)
        if (epoch, position) != (cursor.epoch, cursor.position):
            raise StateError(
                f"the state's epoch and position ({epoch}, {position}) differ from its "
                f"sampler state's ({cursor.epoch}, {cursor.position}): pass a state "
                "returned by state_dict(), unchanged"
            )
        carry = self._state_indices(checked, "carry")
        carry_out = self._state_indices(checked, "carry_out") if "carry_out" in checked else []
        if carry and carry_out:
            raise StateError("a state cannot hold both a carry and a carry_out")
        return BatchCursor(self, cursor, carry, carry_out)

    def _check_state(self, state: object) -> Mapping[str, Any]:
        expected = {
            "kind": "BatchSampler",
            "batch_size": self._batch_size,
            "last_batch": self._last_batch,
        }
        return check_fields(state, expected, self)

    def _state_indices(self, state: Mapping[str, Any], key: str) -> list[int]:
        values = state.get(key)
        if not isinstance(values, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in values
        ):
            raise StateError(f"the state's {key!r} must be a list of ints, got {values!r}")
        return self._check_carry(cast(list[int], values), StateError)

    # torch-style stateful use (EpochStateful)

    def _start_cursor(self, epoch: int) -> BatchCursor:
        return self.batch_cursor(epoch, 0, self.carry_into(epoch))

    def _resume_cursor(self, state: Mapping[str, Any]) -> BatchCursor:
        return self.restore(state)

    def __iter__(self) -> Iterator[list[int]]:
        return self._batches(self._next_cursor())

    @staticmethod
    def _batches(cursor: BatchCursor) -> Iterator[list[int]]:
        while (batch := cursor.next_batch()) is not None:
            yield batch.tolist()

    def __repr__(self) -> str:
        return (
            f"BatchSampler({self._sampler!r}, batch_size={self._batch_size}, "
            f"last_batch={self._last_batch!r})"
        )
