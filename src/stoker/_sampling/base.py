"""``Sampler`` and ``SamplerCursor``: an epoch's order over a source's indices.

A sampler is a description: the order of every epoch is a pure function of its
arguments and the epoch number, so a position in an epoch is two integers. A cursor is
an open position in one epoch's order; it hands out indices in vectorised slices::

    sampler ──cursor(epoch, position)──► SamplerCursor ──take(n)──► int64 indices
       ▲                                       │
       └──────────restore(state)◄──────state_dict()

Samplers also follow the stateful protocol of PyTorch and torchdata (``set_epoch``,
``__iter__``, ``state_dict``, ``load_state_dict``), so they can be handed to code
written for ``torch.utils.data`` samplers.
"""

from __future__ import annotations

import abc
import operator
from collections.abc import Iterator, Mapping, Sized
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._state import check_fields, state_int
from ..errors import ConfigError, StateError
from .stateful import EpochStateful

__all__ = ["IndexArray", "Sampler", "SamplerCursor"]

IndexArray = NDArray[np.int64]
"""A 1-D array of int64 indices, the currency between samplers and the loader."""

_EMPTY: IndexArray = np.empty(0, dtype=np.int64)


def empty_indices() -> IndexArray:
    """Return a fresh empty index array."""
    return _EMPTY.copy()


def as_length(n: int | Sized, what: str) -> int:
    """Return ``n`` as a non-negative length: an int, or ``len(n)`` of a sized object.

    Errors:
        ConfigError: ``n`` is neither an int nor sized, or is negative.
    """
    if isinstance(n, bool):
        raise ConfigError(f"{what} must be an int or a sized object such as a dataset, got {n!r}")
    if isinstance(n, int | np.integer):
        length = int(n)
    elif isinstance(n, Sized):
        length = len(n)
    else:
        raise ConfigError(
            f"{what} must be an int or a sized object such as a dataset, "
            f"got {type(n).__name__}: pass len(your_data) or the dataset itself"
        )
    if length < 0:
        raise ConfigError(f"{what} must be >= 0, got {length}")
    return length


def check_int(value: object, what: str, *, minimum: int) -> int:
    """Return ``value`` as an int that is at least ``minimum``.

    Errors:
        ConfigError: ``value`` is not an int (bools are refused) or is below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigError(f"{what} must be an int >= {minimum}, got {value!r}")
    result = operator.index(value)
    if result < minimum:
        raise ConfigError(f"{what} must be an int >= {minimum}, got {result}")
    return result


class SamplerCursor(abc.ABC, Iterator[int]):
    """An open position in one epoch's order.

    ``take(n)`` hands out the next indices as one int64 array; iterating hands them
    out one at a time as Python ints.

    Example:
        >>> from stoker import SequentialSampler
        >>> cursor = SequentialSampler(5).cursor(epoch=0)
        >>> cursor.take(2).tolist(), cursor.position, list(cursor)
        ([0, 1], 2, [2, 3, 4])

    Errors:
        ConfigError: ``take`` with a negative count.
    """

    _sampler: Sampler
    _epoch: int
    _position: int

    @property
    def epoch(self) -> int:
        """The epoch this cursor walks."""
        return self._epoch

    @property
    def position(self) -> int:
        """How many indices this epoch has handed out so far."""
        return self._position

    def __repr__(self) -> str:
        return f"<cursor of {self._sampler!r} at epoch {self._epoch}, position {self._position}>"

    @abc.abstractmethod
    def take(self, n: int) -> IndexArray:
        """Return the next ``n`` indices, fewer only at the end of the epoch.

        The array is empty once the epoch is done.
        """

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Return this cursor's position as a dict of JSON types, small whatever the length."""

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        taken = self.take(1)
        if taken.size == 0:
            raise StopIteration
        return int(taken[0])


class EpochOrder(abc.ABC):
    """The order of one epoch of one of stoker's own samplers, addressable by position.

    Anything stored in ``_cache`` is recomputed when needed and is left out of pickles.
    """

    _cache: Any = None

    @abc.abstractmethod
    def indices(self, start: int, stop: int) -> IndexArray:
        """Return the indices at positions ``[start, stop)``, ``0 <= start <= stop <= len``."""

    def state_fields(self) -> dict[str, Any]:
        """Return fields, beyond the sampler's own, that a restore must check."""
        return {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_cache", None)
        return state


class IndexCursor(SamplerCursor):
    """The cursor of stoker's own samplers: slices of an :class:`EpochOrder`."""

    def __init__(self, sampler: Sampler, order: EpochOrder, epoch: int, position: int) -> None:
        self._sampler = sampler
        self._order = order
        self._epoch = epoch
        self._position = position
        self._length = len(sampler)
        self._fields: dict[str, Any] | None = None  # the sampler's, fixed for an epoch

    def take(self, n: int) -> IndexArray:
        # Checked unless a plain int >= 0 (the plan's, once a batch: the check costs
        # more than the slice of a sequential order).
        count = n if type(n) is int and n >= 0 else check_int(n, "take(n)", minimum=0)
        start = self._position
        stop = min(start + count, self._length)
        if stop <= start:
            return empty_indices()
        out = self._order.indices(start, stop)
        self._position = stop
        return out

    def state_dict(self) -> dict[str, Any]:
        fields = self._fields
        if fields is None:
            fields = self._fields = self._sampler._expected_fields()
        extra = self._order.state_fields()
        if extra:
            return {**fields, **extra, "epoch": self._epoch, "position": self._position}
        return {**fields, "epoch": self._epoch, "position": self._position}


class Sampler(EpochStateful[SamplerCursor]):
    """An order over the indices ``[0, source_len)`` for every epoch.

    The order of an epoch is a pure function of the sampler's arguments (its seed among
    them) and the epoch number. ``cursor(epoch, position)`` opens any position of any
    epoch; a cursor's ``state_dict()`` holds a few integers, and ``restore(state)``
    reopens it after checking that the state came from an equal sampler.

    For code written against ``torch.utils.data`` samplers, ``set_epoch(e)`` chooses
    the epoch that ``iter(sampler)`` walks (0 until set), ``load_state_dict(state)``
    makes the next ``iter(sampler)`` resume there (once), and ``state_dict()`` is the
    state of the cursor that ``iter`` returned most recently. ``set_epoch`` to another
    epoch than a loaded state's discards that state.

    Example:
        >>> from stoker import RandomSampler
        >>> sampler = RandomSampler(6, seed=1)
        >>> cursor = sampler.cursor(epoch=2)
        >>> first = cursor.take(4)
        >>> state = cursor.state_dict()
        >>> rest = sampler.restore(state).take(6)
        >>> sorted(first.tolist() + rest.tolist())
        [0, 1, 2, 3, 4, 5]

    Errors:
        ConfigError: an epoch or position out of range.
        StateError: ``restore`` or ``load_state_dict`` with a state from a sampler of
            another kind, length, seed or other argument.
    """

    _cache: Any = None

    @property
    @abc.abstractmethod
    def source_len(self) -> int:
        """The size of the index space: the length of the dataset it was built for."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of indices in one epoch."""

    @abc.abstractmethod
    def _open(self, epoch: int, position: int) -> SamplerCursor:
        """Return a cursor; ``epoch`` and ``position`` are already checked."""

    def _params(self) -> dict[str, Any]:
        """Return the arguments a saved state must match, as JSON types."""
        return {"source_len": self.source_len, "length": len(self)}

    def _expected_fields(self) -> dict[str, Any]:
        return {"kind": type(self).__name__, **self._params()}

    def _check_state(self, state: object) -> Mapping[str, Any]:
        """Check a state before restoring it; subclasses add their own fields."""
        return check_fields(state, self._expected_fields(), self)

    def _fresh_state(self, epoch: int) -> dict[str, Any]:
        """Return the state at the start of ``epoch`` without side effects."""
        return self.cursor(epoch).state_dict()

    def _cursor_state(self, epoch: int, position: int, extra: Mapping[str, Any]) -> dict[str, Any]:
        """Build a cursor's state dict: kind, parameters, ``extra``, epoch, position."""
        return {**self._expected_fields(), **extra, "epoch": epoch, "position": position}

    def cursor(self, epoch: int, position: int = 0) -> SamplerCursor:
        """Open ``epoch``'s order at ``position``.

        Errors:
            ConfigError: ``epoch < 0`` or ``position`` outside ``[0, len(self)]``.
        """
        epoch = check_int(epoch, "epoch", minimum=0)
        position = check_int(position, "position", minimum=0)
        if self._has_len() and position > len(self):
            raise ConfigError(f"position must be in [0, {len(self)}] for {self!r}, got {position}")
        return self._open(epoch, position)

    def _has_len(self) -> bool:
        """Whether ``len(self)`` is known; only wrapped foreign samplers may lack it."""
        return True

    def restore(self, state: Mapping[str, Any]) -> SamplerCursor:
        """Reopen the cursor that saved ``state``.

        Errors:
            StateError: ``state`` came from another kind of sampler or one built with
                other arguments, or its epoch or position is invalid.
        """
        checked = self._check_state(state)
        epoch = state_int(checked, "epoch", self)
        position = state_int(checked, "position", self)
        if self._has_len() and position > len(self):
            raise StateError(
                f"the state's position {position} is past the end of {self!r}, "
                f"which has {len(self)} indices per epoch"
            )
        return self.cursor(epoch, position)

    # torch-style stateful use (EpochStateful)

    def _start_cursor(self, epoch: int) -> SamplerCursor:
        return self.cursor(epoch)

    def _resume_cursor(self, state: Mapping[str, Any]) -> SamplerCursor:
        return self.restore(state)

    def _start_state(self, epoch: int) -> dict[str, Any]:
        return self._fresh_state(epoch)

    def _loaded_epoch(self, state: Mapping[str, Any]) -> int:
        # Checked without opening a cursor, which may be costly for a wrapped sampler.
        checked = self._check_state(state)
        state_int(checked, "position", self)
        return state_int(checked, "epoch", self)

    def __iter__(self) -> SamplerCursor:
        return self._next_cursor()

    def __getstate__(self) -> dict[str, Any]:
        # A pickle is the description plus the epoch and any loaded state.
        state = super().__getstate__()
        state.pop("_cache", None)
        return state
