"""torchdata's ``Stateful`` protocol for the drop-in loader's samplers and streams.

An object with ``state_dict()`` and ``load_state_dict(state)`` is *stateful*: the
drop-in asks it for its state and gives it back when resuming, as torchdata's
``StatefulDataLoader`` does. States hold JSON types in stoker's state, so a
tensor in them (a ``torch.Generator``'s state) travels as its dtype and values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from .._iterdataset import Cursor
from ..errors import StateError

__all__ = ["StatefulStreamCursor", "from_json", "is_stateful", "to_json"]

_TENSOR = "__torch_tensor__"


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
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"a state_dict() key must be a str for JSON, got {key!r}")
            out[key] = to_json(item)
        return out
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
        return {k: from_json(v) for k, v in value.items()}
    return value


class StatefulStreamCursor(Cursor[Any]):
    """Reads a stream whose dataset or iterator is stateful, as torchdata's workers do.

    Restoring loads the dataset's state, creates the iterator, then loads the
    iterator's state. The state is ``{"dataset": ..., "iterator": ...}``: the
    dataset's state when it is not its own iterator, and the iterator's state when
    it is stateful (None otherwise).
    """

    def __init__(self, dataset: Any, state: dict[str, Any] | None) -> None:
        if state is not None and (not isinstance(state, dict) or set(state) != _KEYS):
            raise StateError(
                f"the state of {type(dataset).__name__} must have the keys {sorted(_KEYS)}, got "
                f"{state!r}: pass a state saved by the same loader"
            )
        self._ds = dataset
        self._state = state
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
        self._it = it
        return self._it

    def __next__(self) -> Any:
        return next(self._it if self._it is not None else self._start())

    def state_dict(self) -> dict[str, Any]:
        it = self._it if self._it is not None else self._start()
        ds = self._ds
        return {
            "dataset": to_json(ds.state_dict()) if it is not ds and is_stateful(ds) else None,
            "iterator": to_json(it.state_dict()) if is_stateful(it) else None,  # type: ignore[attr-defined]
        }


_KEYS = {"dataset", "iterator"}
