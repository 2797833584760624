"""``default_collate``: records in, one batch out (``pad_collate`` builds on it).

Collation follows the structure of the first record: arrays are stacked (PyTorch CPU
tensors too, as NumPy arrays that share their memory), Python and
NumPy scalars become 1-D arrays, strings and bytes become lists, and containers
(dict, tuple, list, namedtuple, dataclass) are collated field by field. When ``out``
(a batch of the same structure) is given, arrays are written into it instead of being
allocated; this is how planned, recycled buffers are filled.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._tree import is_dataclass_instance, is_namedtuple
from ._typing import releases_gil
from .errors import CollateError

__all__ = ["default_collate"]

_SCALAR_DTYPES: dict[type, Any] = {
    bool: np.bool_,
    int: np.int64,
    float: np.float64,
    complex: np.complex128,
}


@releases_gil  # NumPy copies
def default_collate(records: Sequence[Any], out: Any = None) -> Any:
    """Stack a list of records into one batch.

    Args:
        records: the records of one batch, all with the structure of the first.
        out: optional batch of the same structure whose arrays receive the result.

    Returns:
        The batch: arrays of shape ``(len(records), ...)`` at the leaves.

    Example:
        >>> import numpy as np
        >>> batch = default_collate([{"x": np.zeros(2), "y": 1}, {"x": np.ones(2), "y": 2}])
        >>> batch["x"].shape, batch["y"].tolist()
        ((2, 2), [1, 2])

    Errors:
        CollateError: records whose arrays or lists differ in shape (it names the field
            and the shapes, and points at :func:`pad_collate` and :func:`~stoker.pack`)
            or whose structure differs (keys, tuple lengths).
    """
    if not records:
        raise CollateError("cannot collate an empty list of records")
    return _collate(records, out, "batch")


def _collate(records: Sequence[Any], out: Any, where: str) -> Any:
    first = records[0]
    if isinstance(first, np.ndarray):
        return _stack(records, out, where)
    if isinstance(first, bool | int | float | complex | np.generic):
        return _scalars(records, out, where)
    if _is_tensor(first):
        return _stack_tensors(records, out, where)
    if isinstance(first, str | bytes):
        return list(records)
    if isinstance(first, Mapping):
        keys = list(first)
        for r in records:
            if not isinstance(r, Mapping) or r.keys() != first.keys():
                got = sorted(r) if isinstance(r, Mapping) else type(r).__name__
                raise CollateError(f"cannot collate {where}: keys {sorted(keys)} vs {got}")
        return {
            k: _collate([r[k] for r in records], _child(out, k), f"{where}[{k!r}]") for k in keys
        }
    if isinstance(first, tuple | list):
        n = len(first)
        for r in records:
            if isinstance(r, list) and len(r) != n and _holds_numbers(first, r):
                raise CollateError(
                    f"cannot collate {where}: lists of length {n} and {len(r)} in one batch; "
                    "pad them with collate_fn=sk.pad_collate, pack them into fixed-length "
                    "rows with sk.pack(ds, length), or make them equal in a map"
                )
            if not isinstance(r, tuple | list) or len(r) != n:
                raise CollateError(
                    f"cannot collate {where}: sequences of length {n} and "
                    f"{len(r) if isinstance(r, tuple | list) else type(r).__name__}"
                )
        columns = [
            _collate([r[i] for r in records], _child(out, i), f"{where}[{i}]") for i in range(n)
        ]
        if is_namedtuple(first):
            return type(first)(*columns)
        return tuple(columns) if isinstance(first, tuple) else columns
    if is_dataclass_instance(first):
        names = [f.name for f in dataclasses.fields(first) if f.init]
        fields = {
            n: _collate([getattr(r, n) for r in records], _child(out, n), f"{where}.{n}")
            for n in names
        }
        return type(first)(**fields)
    return list(records)


def _holds_numbers(a: Any, b: list[Any]) -> bool:
    """True when lists ``a`` and ``b`` look like token lists (their first item is a number)."""
    head = a[0] if isinstance(a, list) and a else (b[0] if b else None)
    return isinstance(head, int | float | np.number)


def _scalars(records: Sequence[Any], out: Any, where: str) -> np.ndarray:
    try:
        column = np.array(records)
    except (TypeError, ValueError, OverflowError) as exc:
        raise CollateError(f"cannot collate {where}: {exc}") from exc
    if column.ndim != 1 or column.dtype.kind not in "biufc":
        kinds = sorted({type(r).__name__ for r in records})
        raise CollateError(f"cannot collate {where}: records mix types {kinds}")
    if isinstance(out, np.ndarray) and out.dtype == column.dtype and out.shape == column.shape:
        out[...] = column
        return out
    return column


def _child(out: Any, key: Any) -> Any:
    if out is None:
        return None
    if isinstance(key, str) and dataclasses.is_dataclass(out):
        return getattr(out, key)
    return out[key]


def _stack(records: Sequence[Any], out: Any, where: str) -> np.ndarray:
    shape = records[0].shape
    for r in records:
        if not isinstance(r, np.ndarray) or r.shape != shape:
            got = r.shape if isinstance(r, np.ndarray) else type(r).__name__
            raise CollateError(
                f"cannot collate {where}: arrays of shape {shape} and {got} in one batch; "
                "pad them with collate_fn=sk.pad_collate, pack them into fixed-length rows "
                "with sk.pack(ds, length), or resize them in a map"
            )
    if isinstance(out, np.ndarray) and out.shape == (len(records), *shape):
        try:
            return np.stack(records, out=out, casting="no")
        except TypeError:
            pass  # a record of another dtype: allocate rather than cast silently
    return np.stack(records)


def _is_tensor(value: object) -> bool:
    # Only an imported torch can have made a tensor: never import it here.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _stack_tensors(records: Sequence[Any], out: Any, where: str) -> Any:
    """PyTorch tensors stacked as one NumPy array (into ``out`` when it fits).

    Tensors NumPy cannot view (on a GPU, bfloat16, requiring grad) are stacked by
    ``torch.stack`` instead, into a tensor.
    """
    try:
        arrays = [r.numpy() if _is_tensor(r) else r for r in records]
    except (TypeError, RuntimeError):
        torch = sys.modules["torch"]
        try:
            return torch.stack(list(records))
        except (TypeError, RuntimeError) as exc:
            raise CollateError(f"cannot collate {where}: {exc}") from exc
    return _stack(arrays, out, where)
