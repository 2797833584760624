"""``from_hf``: a HuggingFace ``datasets.Dataset`` (map-style) or ``IterableDataset`` (a stream).

A ``Dataset`` is read through its Arrow table, one ``take`` per batch, through the
indices mapping that ``select``, ``shuffle``, ``filter`` and ``train_test_split``
leave behind (row ``i`` of the dataset is row ``indices[i]`` of the table). An
``IterableDataset`` is read record by record and resumes through HuggingFace's own
``state_dict()`` / ``load_state_dict()``.

Needs ``datasets`` (``pip install 'stoker[hf]'``), imported only when called.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from .._context import Context
from .._hosts import Shard
from .._iterdataset import Cursor, StreamNode, parent_state, state_count
from .._shm import is_sharing
from ..errors import ConfigError, MissingExtra, StateError
from .arrow_blocks import ArrowBlocks
from .blocks import check_cache_bytes
from .decode_cache import DEFAULT_CACHE_BYTES
from .extras import require
from .shared import SharedArray, share_lock

__all__ = ["HFDataset", "HFStream", "from_hf"]

_WHAT = "the HuggingFace dataset"

Record = dict[str, Any]

_copy_lock = threading.Lock()


def _private_copy(hf: Any) -> Any:
    """A copy of an HF ``IterableDataset`` to iterate: HF keeps the iteration state on
    the object (and its chain), so two passes must not share one.

    The copy shares what HF shares between copies itself: the class-wide cache of
    Hub file systems, which other threads may grow while it is copied.
    """
    memo: dict[int, Any] = {}
    try:
        cache = require("huggingface_hub", "hf").HfFileSystem._cache
        memo[id(cache)] = cache
    except (MissingExtra, AttributeError):
        pass
    with _copy_lock:
        return copy.deepcopy(hf, memo)


State = dict[str, Any]


def _file_backed(data: Any) -> bool:
    """True when an HF table pickles as references to its cache files (no data copied)."""
    table = require("datasets.table", "hf")
    if isinstance(data, table.MemoryMappedTable):
        return True
    if isinstance(data, table.ConcatenationTable):
        blocks = [block for row in data.blocks for block in row]
        return all(isinstance(block, table.MemoryMappedTable) for block in blocks)
    return False


def _check_columns(schema: Any, features: Any, columns: Sequence[str] | None) -> list[str]:
    """``check_schema``, with the HuggingFace feature named when a type cannot be batched."""
    from .arrow_columns import check_schema, select_columns

    chosen = select_columns(schema.names, columns, _WHAT)
    for name in chosen:
        try:
            check_schema(schema, [name], _WHAT)
        except ConfigError as exc:
            feature = features.get(name) if features is not None else None
            if feature is None:
                raise
            kind = type(feature).__name__
            raise ConfigError(f"{exc} (it is a HuggingFace {kind} feature)") from None
    return chosen


class HFDataset(ArrowBlocks):
    """Rows of a HuggingFace ``datasets.Dataset``; built by :func:`from_hf`.

    A batch is read from the dataset's Arrow table, through the dataset's indices
    mapping when it has one, on the block protocol of Arrow tables
    (:mod:`stoker._sources.arrow_blocks`). Formatting (``set_format``,
    ``with_format``) does not apply: records come from the Arrow data, as for every
    table source.

    Example:
        >>> from datasets import Dataset
        >>> ds = from_hf(Dataset.from_dict({"x": [1, 2, 3], "s": ["a", "b", "c"]}).select([2, 0]))
        >>> len(ds), int(ds[0]["x"]), ds[1]["s"]
        (2, 3, 'a')

    Resources:
        None of its own in this process. For process workers, a dataset backed by
        cache files (``load_from_disk``, ``load_dataset``) pickles as references to
        them, which each worker memory-maps; an in-memory one (``from_dict``, ...) is
        shared: its table (and indices mapping) is copied once into shared memory,
        which belongs to this dataset and is released when it is garbage collected.

    Errors:
        See :func:`from_hf`.
    """

    _transient: ClassVar[tuple[str, ...]] = (*ArrowBlocks._transient, "_table", "_shared_index")

    def __init__(
        self,
        data: Any,
        columns: list[str],
        index: np.ndarray | None,
        index_data: Any,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._columns = columns
        if _file_backed(data):
            self._data: Any = data  # pickles as its file paths
            self._arrow: Any = None
        else:
            from .arrow import from_arrow

            self._data = None
            self._arrow = from_arrow(data.table, columns)  # shared with process workers
        self._index = index
        # An indices mapping in a cache file pickles as its path; the array is rebuilt.
        self._index_data = (
            index_data if index_data is not None and _file_backed(index_data) else None
        )
        self._len = int(data.num_rows if index is None else len(index))
        self._table: Any = None
        self._shared_index: SharedArray | None = None
        self._arrow_blocks(self._len, cache_bytes)

    def __len__(self) -> int:
        return self._len

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    def _arrow_table(self) -> Any:
        table = self._table
        if table is None:
            if self._arrow is not None:
                table = self._arrow.table
            else:
                table = self._data.table.select(self._columns)
            self._table = table
        return table

    def _source_name(self) -> str:
        return f"from_hf(a Dataset of {self._len:,} rows)"

    def _table_rows(self, indices: np.ndarray) -> np.ndarray | None:
        index = self._index
        if index is None and self._index_data is not None:
            index = self._index = _index_array(self._index_data)
        return None if index is None else index[indices]

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if self._index_data is not None:
            state["_index"] = None
        elif self._index is not None and self._index.size and is_sharing():
            with share_lock:
                if self._shared_index is None:
                    self._shared_index = SharedArray(self._index)
                state["_index"] = self._shared_index
        return state

    def __repr__(self) -> str:
        return f"HFDataset(len={self._len}, columns={self._columns})"


def _index_array(indices: Any) -> np.ndarray:
    """The indices mapping (an HF table of one uint64 column) as int64 positions."""
    column = indices.table.column(0)
    array: np.ndarray = column.to_numpy().astype(np.int64, copy=False)
    return array


def _converter(t: Any) -> Callable[[Any], Any] | None:
    """How to turn HF's Python value of Arrow type ``t`` into a stoker record value."""
    from .arrow_columns import pa

    def numeric_dtype(x: Any) -> np.dtype[Any] | None:
        if pa.types.is_integer(x) or pa.types.is_floating(x) or pa.types.is_boolean(x):
            dtype: np.dtype[Any] = np.dtype(x.to_pandas_dtype())
            return dtype
        return None

    scalar = numeric_dtype(t)
    if scalar is not None:
        return scalar.type
    leaf = t
    while (
        pa.types.is_list(leaf) or pa.types.is_large_list(leaf) or pa.types.is_fixed_size_list(leaf)
    ):
        leaf = leaf.value_type
    dtype = numeric_dtype(leaf) if leaf is not t else None
    if dtype is not None:
        return lambda value: np.asarray(value, dtype=dtype)
    return None  # strings, binary, dates: as HF gives them


def _has_shuffle_buffer(hf: Any) -> bool:
    """True when HF's ``shuffle(buffer_size=...)`` sits in the stream's chain.

    HF's own state drops the buffer's content (resuming refills it with other
    records), so such a stream is resumed by replaying instead. HF has no public flag
    for it; this walks its chain the way HF itself does (``ex_iterable(s)``).
    """
    module = require("datasets.iterable_dataset", "hf")
    buffered = getattr(module, "BufferShuffledExamplesIterable", None)
    if buffered is None:
        return False
    todo = [getattr(hf, "_ex_iterable", None)]
    while todo:
        node = todo.pop()
        if node is None:
            continue
        if isinstance(node, buffered):
            return True
        todo.append(getattr(node, "ex_iterable", None))
        todo.extend(getattr(node, "ex_iterables", None) or ())
    return False


class _HFCursor(Cursor[Record]):
    """Reads one opened HF ``IterableDataset``; the state is HF's own (``{"hf": ...}``),
    or ``{"steps": n}`` (records read this epoch) for a stream HF cannot resume exactly."""

    def __init__(
        self,
        open_hf: Callable[[], Any],
        convert: dict[str, Callable[[Any], Any]],
        state: State | None,
        replay: bool,
    ) -> None:
        self._open_hf = open_hf
        self._convert = convert
        self._replay = replay
        if replay:
            self._steps = state_count(state, "steps", "from_hf")
            self._state: Any = None
        else:
            self._steps = 0
            self._state = parent_state(state, "from_hf", "hf")
            if self._state is not None and not isinstance(self._state, dict):
                raise StateError(
                    "the state of from_hf needs 'hf' to be HuggingFace's state dict, "
                    f"got {self._state!r}"
                )
        self._hf: Any = None
        self._it: Iterator[Record] | None = None

    def _start(self) -> Iterator[Record]:
        hf = self._hf = self._open_hf()
        if self._state is not None:
            hf.load_state_dict(self._state)
        it: Iterator[Record] = iter(hf)
        self._it = it
        for done in range(self._steps):
            if next(it, None) is None:
                raise StateError(
                    f"the state of from_hf says {self._steps} records were read, but the "
                    f"stream now ends after {done}: resuming needs the same data"
                )
        return it

    def __next__(self) -> Record:
        record: Record = next(self._it if self._it is not None else self._start())
        if self._replay:
            self._steps += 1
        convert = self._convert
        if convert:
            record = {k: (convert[k](v) if k in convert else v) for k, v in record.items()}
        return record

    def state_dict(self) -> State:
        if self._replay:
            return {"steps": self._steps}
        if self._hf is None:
            return {"hf": self._state}
        state: State = self._hf.state_dict()
        return {"hf": state}


class HFStream(StreamNode[Record]):
    """Records of a HuggingFace ``datasets.IterableDataset``; built by :func:`from_hf`.

    Each pass reads a private copy of the HF dataset (``set_epoch`` is called with
    the loader's epoch, so HF's shuffles change every epoch). Split across workers
    and hosts with ``datasets.distributed.split_dataset_by_node``: whole shards per
    reader when the number of readers divides the dataset's ``num_shards``, else
    every n-th record.

    The state is HF's ``state_dict()`` after the last record handed out. HF drops the
    content of a shuffle buffer (``shuffle(buffer_size=...)``) from its state, so a
    stream that has one is resumed instead by reading the epoch again up to the
    saved position: exact, at a cost that grows with the position.

    Example:
        >>> from datasets import Dataset
        >>> stream = from_hf(Dataset.from_dict({"x": [1, 2, 3]}).to_iterable_dataset())
        >>> [int(r["x"]) for r in stream]
        [1, 2, 3]

    Errors:
        StateError: a state of another shape, or one that a replayed stream can no
            longer reach.
    """

    shards_itself: ClassVar[bool] = True

    def __init__(self, hf: Any, columns: list[str] | None, schema: Any) -> None:
        self._hf = hf if columns is None else hf.select_columns(columns)
        self._columns = columns
        self._replay = _has_shuffle_buffer(hf)
        self._convert: dict[str, Callable[[Any], Any]] = {}
        if schema is not None:
            for name in schema.names if columns is None else columns:
                fn = _converter(schema.field(name).type)
                if fn is not None:
                    self._convert[name] = fn

    def _open_hf(self, epoch: int, shard: Shard) -> Any:
        hf = _private_copy(self._hf)
        hf.set_epoch(epoch)
        if shard.count > 1:
            distributed = require("datasets.distributed", "hf")
            hf = distributed.split_dataset_by_node(hf, rank=shard.index, world_size=shard.count)
        return hf

    def _open(self, ctx: Context, state: State | None) -> _HFCursor:
        epoch, shard = ctx.epoch, ctx.shard
        return _HFCursor(lambda: self._open_hf(epoch, shard), self._convert, state, self._replay)

    def __repr__(self) -> str:
        return f"HFStream(columns={self._columns})"


def from_hf(
    dataset: Any, columns: Sequence[str] | None = None, *, cache_bytes: int = DEFAULT_CACHE_BYTES
) -> HFDataset | HFStream:
    """A dataset over a HuggingFace ``datasets.Dataset`` or ``IterableDataset``.

    Needs ``pip install 'stoker[hf]'``. Records are dicts column -> value (numbers as
    NumPy scalars, strings as ``str``, lists of numbers as 1-D arrays), whatever
    format the HF dataset is set to.

    * A ``Dataset`` gives a map-style :class:`HFDataset`: ``len`` is the dataset's,
      and a batch is one Arrow ``take`` through the indices that ``select``,
      ``shuffle``, ``filter`` or ``train_test_split`` left (``flatten_indices()``
      makes reads contiguous again, if that matters for a large dataset on disk).
    * An ``IterableDataset`` gives a stream, :class:`HFStream`, that resumes through
      HF's ``state_dict()``. Its records are converted by its features; a stream
      whose features HF does not know (after some ``map`` calls) yields HF's
      records as they are.

    Args:
        dataset: a ``datasets.Dataset`` or ``datasets.IterableDataset`` (one split, not
            a ``DatasetDict``).
        columns: the columns to read (default: all), in record order.
        cache_bytes: the most this dataset's decoded blocks (runs of up to 65,536
            rows) take in the decode cache of each process that reads it (default
            256 MiB); the process's one cache holds all its table sources' blocks
            within the largest of their ``cache_bytes``. A stream has no blocks.

    Returns:
        An :class:`HFDataset` or an :class:`HFStream`.

    Example:
        >>> from datasets import Dataset
        >>> hf = Dataset.from_dict({"tokens": [[1, 2], [3]], "label": [0, 1]})
        >>> ds = from_hf(hf.shuffle(seed=0), columns=["tokens"])
        >>> sorted(r["tokens"].tolist() for r in ds.__getitems__([0, 1]))
        [[1, 2], [3]]

    Errors:
        ConfigError: not a HF dataset (a ``DatasetDict``: pick a split); a column that
            does not exist (the message names those that do); a column stoker cannot
            batch, such as ``Image``, ``Audio`` or nested features (the message names
            the column, its Arrow type and its feature); a transform set with
            ``set_transform`` / ``with_transform``, which stoker cannot apply; a
            ``cache_bytes`` that is not an int >= 0.
        MissingExtra: ``datasets`` is not installed.
    """
    hfd = require("datasets", "hf")
    check_cache_bytes(cache_bytes)
    if isinstance(dataset, hfd.DatasetDict | hfd.IterableDatasetDict):
        raise ConfigError(
            f"from_hf() needs one split, got a {type(dataset).__name__} with splits "
            f"{list(dataset)}: pass dataset[{next(iter(dataset), 'train')!r}]"
        )
    if isinstance(dataset, hfd.IterableDataset):
        features = dataset.features
        schema = None if features is None else features.arrow_schema
        if schema is not None:
            chosen: list[str] | None = _check_columns(schema, features, columns)
        elif columns is None:
            chosen = None
        else:
            if isinstance(columns, str):
                raise ConfigError(f"columns must be a list of names, got the string {columns!r}")
            chosen = list(columns)
        return HFStream(dataset, chosen, schema)
    if not isinstance(dataset, hfd.Dataset):
        raise ConfigError(
            "from_hf() needs a datasets.Dataset or datasets.IterableDataset, "
            f"got {type(dataset).__name__}"
        )
    if dataset.format.get("type") == "custom":
        raise ConfigError(
            "from_hf() reads the Arrow data and cannot apply a transform set with "
            "set_transform()/with_transform(): pass the dataset without it and apply the "
            "function with .map() on the stoker dataset"
        )
    data = dataset.data
    chosen = _check_columns(data.table.schema, dataset.features, columns)
    indices = dataset._indices  # HF's indices mapping: None, or a table of uint64 rows
    index = None if indices is None else _index_array(indices)
    return HFDataset(data, chosen, index, indices, cache_bytes)
