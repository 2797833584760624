"""Pieces shared by the table workloads (``tokens``, ``parquet_numeric``, ``sqlite``).

Their loaders yield dict batches (column -> array or tensor); the harness counts a
batch with ``len()`` and verifies it as one NumPy array, so :class:`AsArrays` wraps
every batch in a :class:`Batch` that has both, at the cost of one small object per
batch (the same for every loader).
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..verify import to_numpy

__all__ = [
    "AsArrays",
    "Batch",
    "columns_array",
    "decoded_bytes",
    "decoded_parquet",
    "hf_offline",
    "module",
    "parquet_shuffle",
    "write_once",
]

ToArray = Callable[[Any], np.ndarray]


def module(name: str) -> Any:
    """``importlib.import_module(name)``, typed ``Any`` (pyarrow and datasets ship no types)."""
    return importlib.import_module(name)


class Batch:
    """One dict batch: ``len()`` is its rows, ``numpy()`` the array verification compares."""

    __slots__ = ("_batch", "_rows", "_to_array")

    def __init__(self, batch: Any, rows: int, to_array: ToArray) -> None:
        self._batch = batch
        self._rows = rows
        self._to_array = to_array

    def __len__(self) -> int:
        return self._rows

    def numpy(self) -> np.ndarray:
        return self._to_array(self._batch)


class AsArrays:
    """A loader whose dict batches come out as :class:`Batch` objects.

    ``field`` is the column whose length is the batch's row count; ``to_array``
    turns a batch into the array the workload's reference holds.
    """

    def __init__(self, loader: Iterable[Any], field: str, to_array: ToArray) -> None:
        self._loader = loader
        self._field = field
        self._to_array = to_array

    def __iter__(self) -> _Batches:
        return _Batches(iter(self._loader), self._field, self._to_array)


class _Batches:
    """The iterator of :class:`AsArrays`; ``stats()`` is the wrapped iterator's (the
    worker mode a stoker loader used), None for others."""

    def __init__(self, batches: Iterator[Any], field: str, to_array: ToArray) -> None:
        self._batches = batches
        self._field = field
        self._to_array = to_array

    def __iter__(self) -> _Batches:
        return self

    def __next__(self) -> Batch:
        batch = next(self._batches)
        return Batch(batch, len(batch[self._field]), self._to_array)

    def stats(self) -> Any:
        stats = getattr(self._batches, "stats", None)
        return stats() if callable(stats) else None


def columns_array(names: list[str]) -> ToArray:
    """A ``to_array`` that stacks the numeric columns ``names`` into one float64 array.

    float32 and int64 values below 2**53 are exact in float64, so a loader that
    yields float64 (torch's collate of Python floats) and one that yields float32
    give equal arrays when they read the same values.
    """

    def to_array(batch: Any) -> np.ndarray:
        return np.column_stack([to_numpy(batch[n]).astype(np.float64) for n in names])

    return to_array


def hf_offline(cache_dir: Path) -> Path:
    """Keep HuggingFace ``datasets`` off the network and its cache under ``cache_dir``.

    Sets ``HF_DATASETS_OFFLINE``, ``HF_HUB_OFFLINE`` and ``HF_DATASETS_CACHE`` when they
    are not set already (before ``datasets`` is first imported, which reads them);
    returns the cache folder to pass as ``cache_dir=``.
    """
    folder = cache_dir / "hf-datasets"
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_CACHE", str(folder))
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    return folder


def write_once(path: Path, write: Callable[[Path], None], what: str, log: Any) -> Path:
    """``path``, after ``write(tmp)`` made it under a temporary name when it is missing.

    The rename at the end means an interrupted run leaves no half-written file under
    ``path``; the content depends only on the name, so a file that exists is reused.
    """
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    log(f"writing {what} to {path} (reused by later runs)")
    start = time.perf_counter()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    log(f"wrote it in {time.perf_counter() - start:.1f} s ({path.stat().st_size / 1e9:.2f} GB)")
    return path


def decoded_bytes(path: Path) -> int:
    """The uncompressed size of a Parquet file's data, from its metadata."""
    pq = module("pyarrow.parquet")

    meta = pq.read_metadata(path)
    return sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))


DECODED_FOLDER = "parquet-decoded"
"""The ``cache_dir=`` of the table workloads' ``from_parquet``, under the bench cache."""


def decoded_parquet(path: Path, ctx: Any) -> Any:
    """``sk.from_parquet(path, cache_dir=<bench cache>/parquet-decoded)``, its row groups
    written there before timing (``ds.write_cache()``, as HF makes its Arrow copy before
    timing); the time that took, the first time, is logged."""
    import stoker as sk

    ds = sk.from_parquet(path, cache_dir=ctx.cache_dir / DECODED_FOLDER)
    start = time.perf_counter()
    written = ds.write_cache()
    if written:
        ctx.log(
            f"  decoded {written} row groups of {path.name} into {DECODED_FOLDER}/ "
            f"in {time.perf_counter() - start:.1f} s"
        )
    return ds


def parquet_shuffle(ds: Any, path: Path, seed: int) -> tuple[Any, np.ndarray, str]:
    """The sampler stoker reads ``ds`` (``sk.from_parquet(path)``) with, its epoch-0 order,
    and its name.

    A file whose decoded data is larger than the decode cache (the default
    ``cache_bytes``) is read with ``ds.shuffle_sampler(seed)``, aligned to row groups;
    a smaller one with a plain ``sk.RandomSampler``.
    """
    import stoker as sk
    from stoker._sources.decode_cache import DEFAULT_CACHE_BYTES

    n = len(ds)
    if decoded_bytes(path) > DEFAULT_CACHE_BYTES:
        sampler = ds.shuffle_sampler(seed)
        name = f"row-group shuffle (chunk {sampler.chunk_size:,}, window {sampler.window:,})"
    else:
        sampler, name = sk.RandomSampler(n, seed=seed), "full shuffle"
    return sampler, sampler.cursor(epoch=0).take(n), name
