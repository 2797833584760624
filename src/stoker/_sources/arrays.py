"""``from_arrays``: rows of NumPy arrays (or memory-mapped files) as records."""

from __future__ import annotations

import mmap
from typing import Any, Literal

import numpy as np

from .._context import Context, Skip
from .._dataset import DatasetNode
from .._shm import is_sharing
from ..errors import ConfigError
from .shared import SharedArray, share_lock, shareable

__all__ = ["ArrayDataset", "from_arrays"]

# How to reopen a memory-mapped field in another process: (file, dtype, mode, offset, shape, order)
_Reopen = tuple[
    str, np.dtype[Any], Literal["r", "c", "r+"], int, tuple[int, ...], Literal["C", "F"]
]


def _reopen_recipe(array: np.ndarray) -> _Reopen | None:
    """Where a contiguous memmap's bytes lie in its file, so a pickle need not copy them."""
    if not isinstance(array, np.memmap) or array.filename is None or array.size == 0:
        return None
    root: Any = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not isinstance(root.base, mmap.mmap):
        return None
    order: Literal["C", "F"]
    if array.flags.c_contiguous:
        order = "C"
    elif array.flags.f_contiguous:
        order = "F"
    else:
        return None
    offset = int(root.offset) + (array.ctypes.data - root.ctypes.data)
    # Reopen as "r+" what was opened "w+": reopening with "w+" would truncate the file.
    mode: Literal["r", "c", "r+"] = "r" if array.mode == "r" else "c" if array.mode == "c" else "r+"
    return (array.filename, array.dtype, mode, offset, array.shape, order)


class ArrayDataset(DatasetNode[Any]):
    """Records are rows (along the first axis) of one or more arrays; see :func:`from_arrays`.

    A batch is read with one vectorised ``take`` per field, straight into the
    loader's buffers. A memory-mapped array stays on disk: only the rows asked for
    are read, and a pickled dataset reopens the file instead of carrying its bytes.

    Process workers share one copy of every other array instead of each unpickling
    its own: when the loader pickles the pipeline for them, each array is copied
    once into a shared-memory segment, and a worker gathers from a read-only view
    of it. That copy is made the first time and reused by every later loader over
    this dataset, so change the arrays in place only before that (or build a new
    dataset); threads and the main process always read the arrays themselves.

    Example:
        >>> import numpy as np, stoker as sk
        >>> ds = sk.from_arrays(x=np.arange(6).reshape(3, 2), y=np.array([0, 1, 0]))
        >>> ds[1]["x"].tolist(), int(ds[1]["y"])
        ([2, 3], 1)

    Resources:
        The shared copies, once made, belong to this dataset: their segments are
        released when the dataset is garbage collected. A worker's copy of the dataset
        maps them for as long as that copy lives.

    Errors:
        ConfigError: see :func:`from_arrays`.
    """

    _shared: list[SharedArray | None] | None = None

    def __init__(self, names: list[str], arrays: list[np.ndarray], kind: str) -> None:
        self._names = names
        self._kind = kind  # "one" | "tuple" | "dict"
        self._recipes = [_reopen_recipe(a) for a in arrays]
        # Plain ndarray views: gathers then return ndarrays, and no bytes are copied.
        self._arrays = [a.view(np.ndarray) for a in arrays]
        self._len = len(arrays[0])
        self._shared = None

    @property
    def releases_gil(self) -> bool:
        return True  # NumPy gathers

    def __len__(self) -> int:
        return self._len

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[Any | Skip]:
        columns = [list(a.take(indices, 0, None, "clip")) for a in self._arrays]
        if self._kind == "one":
            return columns[0]
        if self._kind == "tuple":
            return list(zip(*columns, strict=True))
        names = self._names
        return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        arrays = self._arrays
        if self._kind == "one":
            return arrays[0].take(indices, 0, out, "clip")
        if self._kind == "tuple":
            outs = out if out is not None else (None,) * len(arrays)
            return tuple(a.take(indices, 0, o, "clip") for a, o in zip(arrays, outs, strict=True))
        pairs = zip(self._names, arrays, strict=True)
        if out is None:
            return {n: a.take(indices, 0, None, "clip") for n, a in pairs}
        return {n: a.take(indices, 0, out[n], "clip") for n, a in pairs}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_shared"] = None
        arrays: list[Any] = [
            None if recipe is not None else a
            for a, recipe in zip(self._arrays, self._recipes, strict=True)
        ]
        if is_sharing():
            shared = self._share()
            arrays = [a if s is None else s for a, s in zip(arrays, shared, strict=True)]
        state["_arrays"] = arrays
        return state

    def _share(self) -> list[SharedArray | None]:
        """Shared copies of the arrays that are not reopened by file (made once, then cached)."""
        with share_lock:
            if self._shared is None:
                self._shared = [
                    SharedArray(a) if recipe is None and shareable(a) else None
                    for a, recipe in zip(self._arrays, self._recipes, strict=True)
                ]
            return self._shared

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._arrays = [
            a
            if recipe is None
            else np.memmap(
                recipe[0],
                dtype=recipe[1],
                mode=recipe[2],
                offset=recipe[3],
                shape=recipe[4],
                order=recipe[5],
            ).view(np.ndarray)
            for a, recipe in zip(self._arrays, self._recipes, strict=True)
        ]

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{n}: {a.dtype}{list(a.shape[1:])}"
            for n, a in zip(self._names, self._arrays, strict=True)
        )
        return f"ArrayDataset(len={self._len}, {fields})"


def from_arrays(*arrays: np.ndarray, **named: np.ndarray) -> ArrayDataset:
    """A map-style dataset over the rows of NumPy arrays or ``np.memmap`` files.

    Record ``i`` is ``array[i]`` for one positional array, a tuple of rows for
    several, and a dict of rows for named arrays. Rows of 1-D arrays are NumPy
    scalars. Arrays are used in place, never copied.

    Args:
        *arrays: arrays with the same first dimension (records as rows or tuples).
        **named: arrays with the same first dimension (records as dicts).

    Returns:
        An :class:`ArrayDataset` whose batches are gathered with one ``take`` per field.

    Example:
        >>> import numpy as np, stoker as sk
        >>> ds = sk.from_arrays(np.zeros((4, 2)), np.arange(4))
        >>> row, label = ds[3]
        >>> row.shape, int(label)
        ((2,), 3)

    Errors:
        ConfigError: no arrays; both positional and named arrays; a field that is not
            a NumPy array or is 0-dimensional; first dimensions that differ (the
            message lists every field's length).
    """
    if arrays and named:
        raise ConfigError(
            "from_arrays() takes either positional arrays or named arrays, not both: "
            "use from_arrays(x, y) or from_arrays(image=x, label=y)"
        )
    if not arrays and not named:
        raise ConfigError(
            "from_arrays() needs at least one array: "
            "use from_arrays(x, y) or from_arrays(image=x, label=y)"
        )
    fields = dict(named) if named else {f"array {k}": a for k, a in enumerate(arrays)}
    for name, array in fields.items():
        if not isinstance(array, np.ndarray):
            raise ConfigError(
                f"from_arrays() field {name!r} must be a NumPy array or np.memmap, "
                f"got {type(array).__name__}: convert it with np.asarray(...)"
            )
        if array.ndim == 0:
            raise ConfigError(
                f"from_arrays() field {name!r} is 0-dimensional: records are rows along "
                "the first axis, so every array needs at least one dimension"
            )
    lengths = {name: len(array) for name, array in fields.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{name}: {n}" for name, n in lengths.items())
        raise ConfigError(
            f"from_arrays() needs arrays of equal length along the first axis, got {listed}; "
            "slice them to a common length first"
        )
    kind = "dict" if named else ("one" if len(arrays) == 1 else "tuple")
    return ArrayDataset(list(fields), list(fields.values()), kind)
