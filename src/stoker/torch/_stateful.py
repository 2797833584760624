"""torchdata's ``Stateful`` protocol for the drop-in loader's samplers and streams.

An object with ``state_dict()`` and ``load_state_dict(state)`` is *stateful*: the
drop-in asks it for its state and gives it back when resuming, as torchdata's
``StatefulDataLoader`` does. States hold JSON types in stoker's state, so a
tensor in them (a ``torch.Generator``'s state) travels as its dtype and values, and
a dict with keys other than strings as its (key, value) pairs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from .._iterdataset import Cursor
from ..errors import StateError

__all__ = [
    "RestoreOnFirstIndex",
    "StatefulStreamCursor",
    "from_json",
    "is_stateful",
    "next_pass_state",
    "to_json",
]

_TENSOR = "__torch_tensor__"
_ITEMS = "__items__"  # a dict with keys other than str: its (key, value) pairs


def is_stateful(obj: object) -> bool:
    """True for an object with ``state_dict()`` and ``load_state_dict(state)``.

    Example:
        >>> is_stateful([1, 2])
        False
    """
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None)
    )


def to_json(value: Any) -> Any:
    """``value`` with every tensor replaced by a JSON description of it.

    Example:
        >>> to_json({"seen": torch.tensor([1, 2], dtype=torch.uint8)})
        {'seen': {'__torch_tensor__': 'uint8', 'values': [1, 2]}}
        >>> to_json({0: 1})
        {'__items__': [[0, 1]]}

    Errors:
        TypeError: a value that is neither JSON nor a tensor.
    """
    if isinstance(value, torch.Tensor):
        return {_TENSOR: str(value.dtype).removeprefix("torch."), "values": value.tolist()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, Mapping):
        if all(isinstance(key, str) for key in value) and _ITEMS not in value:
            return {key: to_json(item) for key, item in value.items()}
        for key in value:
            if not (key is None or isinstance(key, bool | int | float | str)):
                raise TypeError(
                    f"a state_dict() key must be a str, int, float, bool or None, got {key!r}"
                )
        return {_ITEMS: [[key, to_json(item)] for key, item in value.items()]}
    raise TypeError(
        f"a state_dict() holds a {type(value).__name__}: the drop-in keeps states as JSON "
        "(dict, list, str, int, float, bool, None, tensors); return those"
    )


def from_json(value: Any) -> Any:
    """The inverse of :func:`to_json`.

    Example:
        >>> from_json({"__torch_tensor__": "int64", "values": [3]})
        tensor([3])
    """
    if isinstance(value, list):
        return [from_json(v) for v in value]
    if isinstance(value, dict):
        if _TENSOR in value:
            return torch.tensor(value["values"], dtype=getattr(torch, value[_TENSOR]))
        if _ITEMS in value:
            return {key: from_json(item) for key, item in value[_ITEMS]}
        return {k: from_json(v) for k, v in value.items()}
    return value


class StatefulStreamCursor(Cursor[Any]):
    """Reads a PyTorch ``IterableDataset`` as torchdata's ``StatefulDataLoader`` does.

    The state is ``{"dataset": ..., "iterator": ..., "steps": n}``: the dataset's
    state when it is stateful and not its own iterator, the iterator's state when it
    is stateful (a dataset that is its own iterator: its state, once), and the
    records handed out. Restoring loads the dataset's state, creates the iterator,
    then loads the iterator's state; only when neither is stateful does it read
    ``n`` records again (the fast-forward), so a dataset that keeps its own position
    is never moved twice. A state that opens the next pass (``"next_pass"``) gives
    the iterator that ended the last pass its state, then reads a fresh one.
    """

    def __init__(self, dataset: Any, state: dict[str, Any] | None) -> None:
        if state is not None and (
            not isinstance(state, dict) or not _KEYS <= set(state) <= {*_KEYS, *_MORE}
        ):
            raise StateError(
                f"the state of {type(dataset).__name__} must have the keys "
                f"{sorted({*_KEYS, *_MORE})}, got {state!r}: pass a state saved by the same "
                "loader"
            )
        self._ds = dataset
        self._state = state
        self._steps = 0 if state is None else _steps(state, type(dataset).__name__)
        self._it: Iterator[Any] | None = None

    def _start(self) -> Iterator[Any]:
        state, ds = self._state, self._ds
        if state is not None and state["dataset"] is not None:
            ds.load_state_dict(from_json(state["dataset"]))
        it: Any = iter(ds)
        if state is not None and state["iterator"] is not None:
            if not is_stateful(it):
                raise StateError(
                    f"the state holds the state of {type(ds).__name__}'s iterator, but its "
                    "iterator has no load_state_dict: pass a state saved with this dataset"
                )
            it.load_state_dict(from_json(state["iterator"]))
            if state.get(_NEXT_PASS):
                it = iter(ds)  # that iterator ended the last pass; a fresh one reads this
        elif self._steps and not (is_stateful(ds) or is_stateful(it)):
            skipped = sum(1 for _ in itertools.islice(it, self._steps))
            if skipped < self._steps:
                raise StateError(
                    f"the state of {type(ds).__name__} says {self._steps} records were read, "
                    f"but it now ends after {skipped}: resuming a dataset without "
                    "state_dict() needs one that yields the same records every time"
                )
        self._it = it
        return self._it

    def __next__(self) -> Any:
        record = next(self._it if self._it is not None else self._start())
        self._steps += 1
        return record

    def state_dict(self) -> dict[str, Any]:
        it = self._it if self._it is not None else self._start()
        ds = self._ds
        return {
            "dataset": to_json(ds.state_dict()) if it is not ds and is_stateful(ds) else None,
            "iterator": to_json(it.state_dict()) if is_stateful(it) else None,  # type: ignore[attr-defined]
            "steps": self._steps,
        }


def next_pass_state(end: dict[str, Any] | None) -> dict[str, Any] | None:
    """The state that starts the pass after one that ended at ``end`` (a cursor's state
    after its last record).

    As torchdata restores a state saved at the end of a pass: the dataset gets its
    own state back (a dataset that counts its passes goes on counting), an iterator
    gets the state of the one that ended the pass (what it keeps of the process, such
    as the RNG state, is restored), and a fresh iterator reads the next pass. None, to
    start afresh, when neither is stateful.

    Example:
        >>> next_pass_state({"dataset": {"epoch": 1}, "iterator": None, "steps": 9})
        {'dataset': {'epoch': 1}, 'iterator': None, 'steps': 0, 'next_pass': True}
    """
    if end is None or (end.get("dataset") is None and end.get("iterator") is None):
        return None
    return {"dataset": end["dataset"], "iterator": end["iterator"], "steps": 0, _NEXT_PASS: True}


class RestoreOnFirstIndex:
    """A user's sampler that runs ``restore`` (once) as its next pass starts.

    torchdata creates a resumed pass's sampler iterator and moves it past the indices
    already used (a sampler may draw its seed from the process's RNG as it yields its
    first index) before it gives a map-style dataset its state (which may hold that
    RNG). This keeps that order: ``restore`` runs once the iterator exists and, when
    ``started`` (the pass had used indices), once it has yielded its first index. The
    sampler is only iterated, as PyTorch's loader iterates it.

    Example:
        >>> order = RestoreOnFirstIndex([3, 4])
        >>> order.restore = lambda: print("restored")
        >>> list(order)
        restored
        [3, 4]
    """

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.restore: Callable[[], None] | None = None
        self.started = False

    def __iter__(self) -> Iterator[Any]:
        restore, self.restore = self.restore, None
        indices: Iterator[Any] = iter(self.sampler)
        if restore is None:
            return indices
        return _restored(indices, restore, self.started)

    def __len__(self) -> int:
        return len(self.sampler)


def _restored(indices: Iterator[Any], restore: Callable[[], None], started: bool) -> Iterator[Any]:
    if not started:
        restore()
        yield from indices
        return
    try:
        first = next(indices)
    except StopIteration:
        restore()
        return
    restore()
    yield first
    yield from indices


def _steps(state: dict[str, Any], what: str) -> int:
    steps = state.get("steps", 0)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise StateError(f"the state of {what} needs 'steps' to be an int >= 0, got {steps!r}")
    return steps


_KEYS = {"dataset", "iterator"}
_NEXT_PASS = "next_pass"
_MORE = {"steps", _NEXT_PASS}
