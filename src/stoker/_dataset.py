"""``Dataset[T]`` (map-style) and ``IterDataset[T]`` (streams): descriptions of data.

A dataset is an immutable description: chaining methods only build new nodes, and
nothing is read until a record is asked for. Iteration state lives in cursors and in
the loader's iterator, never in the description (user-written ``IterDataset``
subclasses, which follow PyTorch's stateful protocol, are the one exception).

The loader talks to datasets through two internal methods that every stage
implements for its parent chain:

* ``_fetch(indices, ctx) -> list[record | SKIP]``: the records at ``indices``;
  ``SKIP`` stands for a record that a filter removed.
* ``_gather(indices, ctx, out) -> batch | NotImplemented``: the *collated* batch for
  ``indices``, written into ``out`` (a tree of arrays shaped like the batch) when
  given. Stages that can produce a batch with vectorised NumPy work (array sources,
  ranges) implement it; it is the bulk-loading path and is exactly what
  ``default_collate(self._fetch(indices, ctx))`` would return.

Every node also answers two questions about itself, as properties, so that no part
of the loader needs to know the stages by name:

* ``may_skip``: may the node drop records (a filter in its chain)? A loader then
  reads ahead and fills each batch with the next records that pass.
* ``releases_gil``: does all of its work (and its parents') release the GIL? Then
  ``worker_mode="auto"`` runs it on threads. A function is known to when it is marked
  with :func:`~stoker.releases_gil`.

Stoker's own streams (sources and stages alike) subclass ``StreamNode`` and read
through a ``Cursor``; both live here, below the sources that subclass them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar, overload

import numpy as np

from ._context import DEFAULT_CONTEXT, SKIP, Context, Skip
from .errors import FilteredOut, NotSupportedError, StateError

if TYPE_CHECKING:
    from ._hosts import Shard
    from ._stats import SourceShare
    from ._transforms.mix import MixDataset
    from ._transforms.packer import Packer
    from ._transforms.stream import BatchedStream

__all__ = [
    "Cursor",
    "Dataset",
    "DatasetNode",
    "IterDataset",
    "StreamCursor",
    "StreamNode",
    "UnaryNode",
    "as_index_array",
    "parent_state",
    "state_count",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
U = TypeVar("U")

Batch = Any


def as_index_array(indices: Sequence[int] | np.ndarray, length: int) -> np.ndarray:
    """Validate indices against ``length`` and return them as an int64 array.

    Negative indices count from the end, as for Python sequences.

    Errors:
        IndexError: an index outside ``[-length, length)``.
    """
    arr = np.asarray(indices, dtype=np.int64)
    if arr.ndim != 1:
        raise IndexError(f"indices must be one-dimensional, got shape {arr.shape}")
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -length or hi >= length:
            bad = lo if lo < -length else hi
            raise IndexError(f"index {bad} is out of range for a dataset of length {length}")
        if lo < 0:
            arr = np.where(arr < 0, arr + length, arr)
    return arr


class Dataset(Generic[T]):
    """A map-style dataset: a length and a record for every index in ``[0, len)``.

    Subclass it and implement ``__len__`` and ``__getitem__``; add ``__getitems__``
    when a whole batch can be read in one call (one vectorised gather, one query).
    Every dataset gets the lazy chaining methods below.

    Example:
        >>> import stoker as sk
        >>> class Squares(sk.Dataset[int]):
        ...     def __len__(self) -> int:
        ...         return 4
        ...     def __getitem__(self, i: int) -> int:
        ...         return i * i
        >>> ds = Squares().map(lambda x: x + 1)
        >>> [ds[i] for i in range(len(ds))]
        [1, 2, 5, 10]
    """

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")

    def __getitem__(self, index: int) -> T:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __getitems__(self, indices: Sequence[int]) -> list[T]:
        """Return the records at ``indices``; override to read a batch in one call."""
        return [self[i] for i in indices]

    # -- the loader's protocol ------------------------------------------------------

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[T | Skip]:
        """The records at ``indices`` (int64, already in range); ``SKIP`` for removed ones."""
        return list(self.__getitems__(indices.tolist()))

    def _gather(self, indices: np.ndarray, ctx: Context, out: Batch | None) -> Batch:
        """The collated batch for ``indices``, or ``NotImplemented`` (see the module doc)."""
        return NotImplemented

    def _fetch_columns(self, indices: np.ndarray, ctx: Context) -> Any:
        """The records at ``indices`` column by column (a table source's
        ``stoker._sources.columns.Columns``), or ``NotImplemented``."""
        return NotImplemented

    @property
    def may_skip(self) -> bool:
        """True when the node may drop records: ``_fetch`` may return ``SKIP`` (a
        filter sits in the chain). A loader then fills each batch with the next
        records that pass.

        Example:
            >>> import stoker as sk
            >>> sk.range(4).may_skip, sk.range(4).filter(bool).shuffle(0).may_skip
            (False, True)
        """
        return False

    @property
    def releases_gil(self) -> bool:
        """True when reading records (this node and its parents) releases the GIL, so
        that ``worker_mode="auto"`` may run the pipeline on threads.

        False unless a node says otherwise: a dataset of your own that reads with the
        GIL released (I/O, NumPy, a C decoder) may override it to return True.

        Example:
            >>> import stoker as sk
            >>> sk.range(4).shuffle(0).releases_gil, sk.range(4).map(str).releases_gil
            (True, False)
        """
        return False

    def _packer(self, rows: int) -> Packer | None:
        """What builds each batch of ``rows`` packed rows (``pack``); None: no packing."""
        return None

    # -- mixtures (sk.mix) ----------------------------------------------------------

    def _mixture(self) -> MixDataset[Any] | None:
        """The ``sk.mix`` whose order a loader reading this dataset follows; None: none."""
        return None

    def _mixture_report(self, state: dict[str, Any] | None) -> list[SourceShare] | None:
        """Each mixed source's realised share at the loader ``state`` (None: no mix)."""
        mixture = self._mixture()
        return None if mixture is None else mixture._mixture_report(state)

    # -- chaining -------------------------------------------------------------------

    @overload
    def map(self, fn: Callable[[T], U], *, seeded: Literal[False] = False) -> Dataset[U]: ...
    @overload
    def map(
        self, fn: Callable[[T, np.random.Generator], U], *, seeded: Literal[True]
    ) -> Dataset[U]: ...
    def map(self, fn: Callable[..., U], *, seeded: bool = False) -> Dataset[U]:
        """Apply ``fn`` to every record, lazily.

        With ``seeded=True``, ``fn(record, rng)`` gets a NumPy generator derived only
        from (seed, epoch, index), so random augmentations are reproducible and do not
        depend on workers or on the order in which records are computed.

        Example:
            >>> import stoker as sk
            >>> sk.range(0, 3).map(lambda x: x * 10)[2]
            20

        Errors:
            TypeError: ``fn`` is not callable.
        """
        return MapDataset(self, fn, seeded=seeded)

    def filter(self, pred: Callable[[T], bool]) -> Dataset[T]:
        """Keep the records for which ``pred(record)`` is true, lazily.

        The length stays that of the parent (an upper bound); ``ds[i]`` on a removed
        record raises :class:`~stoker.errors.FilteredOut`. In a loader, batches stay
        full: each batch is filled with the next records that pass, and only the last
        batch of an epoch may be short.

        Example:
            >>> import stoker as sk
            >>> ds = sk.range(0, 10).filter(lambda x: x % 3 == 0)
            >>> ds[3]
            3
        """
        return FilterDataset(self, pred)

    def shuffle(self, seed: int) -> Dataset[T]:
        """A fresh random order of the records every epoch, from (seed, epoch).

        Example:
            >>> import stoker as sk
            >>> sorted(sk.range(0, 5).shuffle(seed=1)[i] for i in range(5))
            [0, 1, 2, 3, 4]
        """
        return ShuffleDataset(self, seed)

    def shard(self, index: int, count: int) -> Dataset[T]:
        """Every ``count``-th record starting at ``index``; all shards have equal length.

        The last ``len(self) % count`` records are left out so that every shard has
        ``len(self) // count`` records (uneven shards make collective steps hang).

        Example:
            >>> import stoker as sk
            >>> ds = sk.range(0, 10).shard(1, 3)
            >>> [ds[i] for i in range(len(ds))]
            [1, 4, 7]
        """
        return ShardDataset(self, index, count)

    def pack(
        self,
        length: int,
        fields: Sequence[str] | str = ("tokens",),
        *,
        pad_value: Any = 0,
        overflow: str = "truncate",
    ) -> Dataset[dict[str, np.ndarray]]:
        """Pack variable-length records into rows of ``length`` tokens: see :func:`stoker.pack`.

        Example:
            >>> import stoker as sk
            >>> ds = sk.from_sequence([{"tokens": [1, 2]}, {"tokens": [3]}]).pack(4)
            >>> next(iter(sk.DataLoader(ds, batch_size=1)))["segment_ids"].tolist()
            [[1, 1, 2, 0]]
        """
        return PackDataset(self, length, fields, pad_value=pad_value, overflow=overflow)


class DatasetNode(Dataset[T]):
    """Base of stoker's own map-style stages: public access goes through ``_fetch``."""

    def __getitem__(self, index: int) -> T:
        i = operator.index(index)
        (record,) = self._fetch(as_index_array([i], len(self)), DEFAULT_CONTEXT)
        if record is SKIP:
            raise FilteredOut(f"record {index} of {type(self).__name__} was removed by a filter")
        return record

    def __getitems__(self, indices: Sequence[int]) -> list[T]:
        records = self._fetch(as_index_array(indices, len(self)), DEFAULT_CONTEXT)
        for position, record in enumerate(records):
            if record is SKIP:
                raise FilteredOut(f"record {indices[position]} was removed by a filter")
        return records  # type: ignore[return-value]

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[T | Skip]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(len={len(self)})"


class UnaryNode(DatasetNode[T]):
    """Base of stages over one parent: its length, :attr:`may_skip` and
    :attr:`releases_gil` are the parent's (an index stage: shuffle, shard, slice).

    Subclasses call ``super().__init__(parent)`` and read records through
    ``self._parent``; a stage that changes the length sets ``self._len``.
    """

    _keeps_indices: ClassVar[bool] = True
    """False for a stage whose index ``i`` is not its parent's index ``i`` (shuffle, shard)."""

    def __init__(self, parent: Dataset[Any]) -> None:
        self._parent = parent
        self._len = len(parent)

    def _mixture(self) -> MixDataset[Any] | None:
        mixture = self._parent._mixture()
        if mixture is not None and not self._keeps_indices:
            raise NotSupportedError(
                f"{type(self).__name__} over sk.mix: a mixture decides the order its "
                "sources are read in, so it cannot be reordered or cut by index; use "
                "DataLoader(shuffle=True) (each source in a random order) or shard=..."
            )
        return mixture

    def __len__(self) -> int:
        return self._len

    @property
    def may_skip(self) -> bool:
        return self._parent.may_skip

    @property
    def releases_gil(self) -> bool:
        return self._parent.releases_gil


class StreamCursor(Protocol[T_co]):
    """An open position in a stream: an iterator that can report its state."""

    def __next__(self) -> T_co: ...

    def state_dict(self) -> dict[str, Any]: ...


class IterDataset(Generic[T]):
    """A stream of records, read in order; it resumes from a saved state.

    Subclass it and implement ``__iter__``. To resume cheaply, also implement
    ``state_dict()`` / ``load_state_dict(state)`` (PyTorch's stateful protocol: the
    state of the iterator most recently returned by ``__iter__``). Without them,
    stoker counts the records handed out and resumes by reading that many again,
    which is exact whenever ``__iter__`` yields the same records every time.

    Example:
        >>> import stoker as sk
        >>> ds = sk.from_iterable(lambda: iter(range(5))).map(lambda x: x * 2)
        >>> list(ds)
        [0, 2, 4, 6, 8]
    """

    def __iter__(self) -> Iterator[T]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def state_dict(self) -> dict[str, Any]:
        """The state of the iterator most recently returned by ``__iter__``."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement state_dict(); "
            "stoker resumes it by counting records instead"
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``__iter__`` continue from ``state``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement load_state_dict()")

    # -- the loader's protocol ------------------------------------------------------

    shards_itself: ClassVar[bool] = False
    """Set to True when ``__iter__`` reads only its worker's part of the stream (from
    ``sk.get_worker_info()``); otherwise, with several workers, each worker reads the
    whole stream and keeps every ``num_workers``-th record."""

    @property
    def may_skip(self) -> bool:
        """True when the stream may drop records of its parent (a filter in the chain)."""
        return False

    @property
    def releases_gil(self) -> bool:
        """True when reading the stream (this node and its parents) releases the GIL;
        see :attr:`Dataset.releases_gil`. False unless a node says otherwise."""
        return False

    def _open(self, ctx: Context, state: dict[str, Any] | None) -> StreamCursor[T]:
        """Start reading at ``state`` (None: the beginning), only ``ctx.shard``'s part."""
        return open_user_stream(self, state, ctx.shard)

    def _mixture_report(self, state: dict[str, Any] | None) -> list[SourceShare] | None:
        """Each mixed source's realised share at the loader ``state`` (None: no mix)."""
        parent = getattr(self, "_parent", None)
        return parent._mixture_report(state) if isinstance(parent, IterDataset) else None

    # -- chaining -------------------------------------------------------------------

    @overload
    def map(self, fn: Callable[[T], U], *, seeded: Literal[False] = False) -> IterDataset[U]: ...
    @overload
    def map(
        self, fn: Callable[[T, np.random.Generator], U], *, seeded: Literal[True]
    ) -> IterDataset[U]: ...
    def map(self, fn: Callable[..., U], *, seeded: bool = False) -> IterDataset[U]:
        """Apply ``fn`` to every record, lazily (``seeded``: as for :meth:`Dataset.map`,
        with the record's position in the stream as its index)."""
        return MappedStream(self, fn, seeded=seeded)

    def filter(self, pred: Callable[[T], bool]) -> IterDataset[T]:
        """Keep the records for which ``pred(record)`` is true, lazily."""
        return FilteredStream(self, pred)

    def shuffle(self, window: int, seed: int | None = None) -> IterDataset[T]:
        """Emit the stream window by window, each window of ``window`` records in a
        random order drawn from (seed, epoch, reader, window number).

        Memory: one window of records per reader. The state stays small (the upstream
        state at the window's start and two counters), and resuming is exact. With
        tar shards, add ``shuffle_shards=True`` to vary the shard order too.

        Args:
            window: records shuffled together (held in memory at once).
            seed: the seed of the orders; None: the loader's seed.

        Example:
            >>> import stoker as sk
            >>> sorted(sk.from_iterable(lambda: range(5)).shuffle(window=2, seed=0))
            [0, 1, 2, 3, 4]
        """
        return ShuffledStream(self, window, seed)

    def batch(
        self,
        batch_size: int,
        *,
        drop_remainder: bool = False,
        collate_fn: Callable[[list[T]], Any] | None = None,
    ) -> BatchedStream[T]:
        """Group consecutive records into collated batches of ``batch_size``.

        Use it with ``DataLoader(..., batch_size=None)``, which then yields these
        batches as they are.
        """
        return BatchedStream(self, batch_size, drop_remainder=drop_remainder, collate_fn=collate_fn)


def parent_state(state: dict[str, Any] | None, what: str, key: str = "parent") -> Any:
    """``state[key]`` (None without a state); StateError when the key is missing."""
    if state is not None and (not isinstance(state, dict) or key not in state):
        raise StateError(f"the state of {what} must be a dict with key {key!r}, got {state!r}")
    return None if state is None else state[key]


def state_count(state: dict[str, Any] | None, key: str, what: str) -> int:
    """The counter ``state[key]`` (0 without a state); StateError unless an int >= 0."""
    value = parent_state(state, what, key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise StateError(f"the state of {what} needs {key!r} to be an int >= 0, got {value!r}")
    return value or 0


class Cursor(Iterator[T], Generic[T]):
    """An open position in a stream: an iterator that reports its state.

    The default state is the parent cursor's under ``"parent"``; sources override it.
    """

    _parent: StreamCursor[Any]

    def state_dict(self) -> dict[str, Any]:
        """The JSON state from which ``_open`` resumes right after the last record."""
        return {"parent": self._parent.state_dict()}


class StreamNode(IterDataset[T]):
    """Base of stoker's stream stages: ``iter()`` and the stateful protocol via ``_open``.

    Example:
        >>> import stoker as sk
        >>> ds = sk.from_iterable(lambda: range(3))
        >>> next(iter(ds)), ds.state_dict()
        (0, {'steps': 1})

    Errors:
        StateError: ``load_state_dict`` with a state of another shape.
    """

    _pending: dict[str, Any] | None = None
    _live: Cursor[T] | None = None

    def _open(self, ctx: Context, state: dict[str, Any] | None) -> Cursor[T]:
        raise NotImplementedError

    @property
    def elastic(self) -> bool:
        """True when a state resumes under any ``num_workers`` and host count.

        An elastic stream keeps its state per unit of data (a shard), not per reader,
        so the states of all readers can be dealt anew to other readers
        (``_deal_state``). Tar shards are elastic, and so are ``map``, ``filter`` and
        ``batch`` over them; other streams resume only under the same ``num_workers``.
        """
        return False

    def _deal_state(
        self, parts: Sequence[tuple[Shard, dict[str, Any] | None]], new: Shard
    ) -> dict[str, Any]:
        """The state of reader ``new`` (index of count) when the readers ``parts`` (the
        shard each read and its state; None: not started) are dealt anew. Elastic only."""
        raise NotImplementedError(f"{type(self).__name__} is not elastic")

    def __iter__(self) -> Iterator[T]:
        state, self._pending = self._pending, None
        self._live = self._open(DEFAULT_CONTEXT, state)
        return self._live

    def state_dict(self) -> dict[str, Any]:
        """The state of the iterator most recently returned by ``iter()``."""
        if self._live is not None:
            return self._live.state_dict()
        if self._pending is not None:
            return self._pending
        return self._open(DEFAULT_CONTEXT, None).state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` continue from ``state`` (its shape is checked now)."""
        self._open(DEFAULT_CONTEXT, state)
        self._pending, self._live = state, None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_live", None)  # an open iterator belongs to this process
        return state


# The stage classes import Dataset/IterDataset from this module, so they come last.
from ._sources.iterable import open_user_stream  # noqa: E402
from ._transforms.filter import FilterDataset  # noqa: E402
from ._transforms.map import MapDataset  # noqa: E402
from ._transforms.pack import PackDataset  # noqa: E402
from ._transforms.shard import ShardDataset  # noqa: E402
from ._transforms.shuffle import ShuffleDataset  # noqa: E402
from ._transforms.stream import BatchedStream, FilteredStream, MappedStream  # noqa: E402
from ._transforms.stream_shuffle import ShuffledStream  # noqa: E402
