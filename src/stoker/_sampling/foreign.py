"""``ForeignSampler``: any iterable of indices, such as a ``torch.utils.data`` sampler."""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Iterator, Mapping, Sized
from itertools import islice
from typing import Any

import numpy as np

from .._torch_types import is_torch_data
from ..errors import ConfigError, StateError
from .base import IndexArray, Sampler, SamplerCursor, as_length, check_int, empty_indices
from .batch import BatchSampler

__all__ = ["ForeignSampler", "as_sampler"]


def _is_stateful(obj: object) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None)
    )


def _json_state(obj: Any) -> Any:
    """``obj.state_dict()``, checked to hold JSON types only."""
    state = obj.state_dict()
    try:
        return json.loads(json.dumps(state))
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{type(obj).__name__}.state_dict() must return JSON types (dict, list, str, "
            f"int, float, bool, None) to be kept in a loader state: {exc}"
        ) from None


class _ForeignCursor(SamplerCursor):
    def __init__(self, sampler: ForeignSampler, epoch: int, position: int) -> None:
        self._sampler = sampler
        self._epoch = epoch
        wrapped = self._wrapped = sampler.wrapped
        set_epoch = getattr(wrapped, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
        # torchdata's Stateful protocol: the sampler's own state as this epoch begins.
        self._wrapped_state = _json_state(wrapped) if _is_stateful(wrapped) else None
        self._it: Iterator[Any] = iter(wrapped)
        self._ended = False
        skipped = sum(1 for _ in islice(self._it, position))
        if skipped < position:
            raise StateError(
                f"{sampler!r} yielded only {skipped} indices in epoch {epoch}, so it cannot "
                f"resume at position {position}: the wrapped sampler must yield the same "
                "order for the same epoch"
            )
        self._position = position

    def take(self, n: int) -> IndexArray:
        count = check_int(n, "take(n)", minimum=0)
        if count == 0:
            return empty_indices()
        out = np.fromiter(map(self._index, islice(self._it, count)), dtype=np.int64)
        if out.size < count:
            self._ended = True
        limit = self._sampler.source_len
        bad = np.flatnonzero((out < 0) | (out >= limit))
        if bad.size:
            raise IndexError(
                f"{self._sampler!r} yielded index {int(out[bad[0]])} at position "
                f"{self._position + int(bad[0])} of epoch {self._epoch}, outside [0, {limit}): "
                "build the wrapped sampler for the dataset it is used with"
            )
        self._position += out.size
        return out

    def _index(self, value: Any) -> int:
        try:
            return operator.index(value)
        except TypeError:
            raise TypeError(
                f"{self._sampler!r} yielded {value!r}, which is not an int index"
            ) from None

    def state_dict(self) -> dict[str, Any]:
        snapshot = self._wrapped_state
        wrapped = self._wrapped
        done = self._ended or (isinstance(wrapped, Sized) and self._position >= len(wrapped))
        if snapshot is not None and done:
            # The epoch is read: the sampler's state now is where the next one begins.
            snapshot = _json_state(wrapped)
        extra = {} if snapshot is None else {"wrapped_state": snapshot}
        return self._sampler._cursor_state(self._epoch, self._position, extra)


class ForeignSampler(Sampler):
    """A stoker sampler around any object that iterates over indices.

    The wrapped object needs ``__iter__`` yielding ints in ``[0, source_len)``; it may
    have ``__len__`` (needed for ``len``) and ``set_epoch(epoch)``, which is called
    before each epoch is iterated. PyTorch samplers qualify. A wrapped sampler with
    ``state_dict()``/``load_state_dict()`` (torchdata's ``Stateful``, e.g. an epoch
    counter or its own RNG) has its state as each epoch begins kept in the cursor's
    state (JSON types only) and given back on restore.

    Opening a cursor at ``position`` iterates the wrapped sampler and skips
    ``position`` indices, so exact resume needs a wrapped sampler that yields the same
    order whenever it is iterated for the same epoch (a seeded sampler with
    ``set_epoch`` does; ``torch.utils.data.RandomSampler`` without a generator does
    not). Indices are checked as they are taken.

    Args:
        obj: the wrapped sampler.
        source_len: the length of the dataset the indices are for.

    Example:
        >>> from stoker._sampling.foreign import ForeignSampler
        >>> sampler = ForeignSampler([3, 1, 2, 0], source_len=4)
        >>> sampler.cursor(epoch=0, position=1).take(2).tolist()
        [1, 2]

    Errors:
        ConfigError: ``obj`` is not iterable, or ``source_len`` is not an int >= 0.
        TypeError: ``len()`` of a sampler whose wrapped object has no ``__len__``;
            ``take`` when the wrapped object yields something that is not an int.
        IndexError: ``take`` when the wrapped object yields an index outside
            ``[0, source_len)``.
        StateError: ``restore`` with a state from another sampler, or at a position
            the wrapped sampler does not reach.
    """

    def __init__(self, obj: Iterable[int], source_len: int) -> None:
        super().__init__()
        if not isinstance(obj, Iterable):
            raise ConfigError(
                f"a sampler must be iterable over indices (define __iter__), "
                f"got {type(obj).__name__}"
            )
        self._obj = obj
        self._source_len = as_length(source_len, "source_len")

    @property
    def wrapped(self) -> Iterable[int]:
        """The wrapped object."""
        return self._obj

    @property
    def source_len(self) -> int:
        return self._source_len

    def __len__(self) -> int:
        if not isinstance(self._obj, Sized):
            raise TypeError(
                f"{type(self._obj).__name__} has no __len__, so the number of indices per "
                "epoch is unknown"
            )
        return len(self._obj)

    def _has_len(self) -> bool:
        return isinstance(self._obj, Sized)

    def _params(self) -> dict[str, Any]:
        return {
            "source_len": self._source_len,
            "length": len(self) if self._has_len() else None,
            "wrapped": type(self._obj).__qualname__,
        }

    def _fresh_state(self, epoch: int) -> dict[str, Any]:
        return self._cursor_state(epoch, 0, {})

    def _open(self, epoch: int, position: int) -> SamplerCursor:
        return _ForeignCursor(self, epoch, position)

    def restore(self, state: Mapping[str, Any]) -> SamplerCursor:
        """Reopen the cursor that saved ``state``; a stateful wrapped sampler first gets
        back the state it had when that epoch began (torchdata's protocol).

        Errors:
            StateError: as for :meth:`Sampler.restore`, or a saved sampler state for a
                wrapped sampler without ``load_state_dict``.
        """
        saved = state.get("wrapped_state") if isinstance(state, Mapping) else None
        if saved is not None:
            if not _is_stateful(self._obj):
                raise StateError(
                    f"the state holds the state of a stateful sampler, but {self!r} wraps one "
                    "without load_state_dict: pass a state saved with this sampler"
                )
            self._check_state(state)
            self._obj.load_state_dict(saved)  # type: ignore[attr-defined]
        return super().restore(state)

    def __repr__(self) -> str:
        return f"ForeignSampler({type(self._obj).__qualname__}, source_len={self._source_len})"


def as_sampler(obj: object, source_len: int) -> Sampler:
    """Return ``obj`` as a stoker sampler over ``[0, source_len)``.

    Stoker samplers come back unchanged; any other iterable is wrapped in a
    :class:`ForeignSampler`.

    Example:
        >>> from stoker import RandomSampler
        >>> sampler = RandomSampler(8)
        >>> as_sampler(sampler, 8) is sampler
        True

    Errors:
        ConfigError: a stoker sampler built for another length, a ``BatchSampler``
            (which yields batches, not indices), or an object that is not iterable.
    """
    if isinstance(obj, Sampler):
        if obj.source_len != source_len:
            raise ConfigError(
                f"sampler was built for {obj.source_len} records but the dataset has "
                f"{source_len}: build the sampler from the dataset, e.g. RandomSampler(dataset)"
            )
        return obj
    if isinstance(obj, BatchSampler) or is_torch_data(obj, "BatchSampler"):
        raise ConfigError(
            "a BatchSampler yields batches, not indices: pass it as batch_sampler=, not sampler="
        )
    if not isinstance(obj, Iterable):
        raise ConfigError(
            f"sampler must be iterable over indices (define __iter__), got {type(obj).__name__}"
        )
    return ForeignSampler(obj, source_len)
