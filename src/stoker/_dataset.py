"""``Dataset[T]``: a map-style description of data (streams: :mod:`stoker._iterdataset`).

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
* ``shares_process``: may all of its work (and its parents') run in the training
  process, because it cannot crash it? Otherwise, with workers, ``worker_mode="auto"``
  runs it in worker processes only. A function is known to when it is marked with
  :func:`~stoker.shares_process` (or :func:`~stoker.releases_gil`).

Stoker's own map-style sources and stages subclass ``DatasetNode`` (``UnaryNode``
for a stage over one parent); both live here, below the nodes that subclass them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, overload

import numpy as np

from ._context import DEFAULT_CONTEXT, SKIP, Context, Skip
from .errors import FilteredOut, NotSupportedError

if TYPE_CHECKING:
    from ._stats import SourceShare
    from ._transforms.mix import MixDataset
    from ._transforms.packer import Packer

__all__ = ["Dataset", "DatasetNode", "UnaryNode", "as_index_array"]

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

    def _fetch_each(self, indices: np.ndarray, ctx: Context) -> Iterator[T | Skip]:
        """``_fetch``'s records one at a time, in order. A stage that makes its records
        one by one (``map``) yields each as soon as it is made, so that the batch
        builder can write it into the batch before the next one is made."""
        return iter(self._fetch(indices, ctx))

    def _gather(self, indices: np.ndarray, ctx: Context, out: Batch | None) -> Batch:
        """The collated batch for ``indices``, or ``NotImplemented`` (see the module doc)."""
        return NotImplemented

    def _fetch_columns(self, indices: np.ndarray, ctx: Context) -> Any:
        """The records at ``indices`` column by column (a table source's
        ``stoker._sources.columns.Columns``), or ``NotImplemented``."""
        return NotImplemented

    def _record_name(self, index: int, ctx: Context) -> str | None:
        """Where record ``index`` is read from (a file, a URL), named in the errors
        raised while loading it; None where the source does not say."""
        return None

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

    @property
    def shares_process(self) -> bool:
        """True when reading records (this node and its parents) is safe in the
        training process: it cannot crash it. With ``num_workers > 0`` and
        ``worker_mode="auto"``, a pipeline that is not runs in worker processes only,
        so that a native crash is a :class:`~stoker.WorkerCrashed`, never the end of
        the training run; one that is may start on threads and go inline.

        By default :attr:`releases_gil` (such a node runs on thread workers anyway):
        stoker's own sources and stages are, a function is when it is marked with
        :func:`~stoker.shares_process` or :func:`~stoker.releases_gil`, and a dataset
        of your own may override this to return True.

        Example:
            >>> import stoker as sk
            >>> sk.range(4).shuffle(0).shares_process, sk.range(4).map(str).shares_process
            (True, False)
            >>> sk.range(4).map(sk.shares_process(str)).shares_process
            True
        """
        return self.releases_gil

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

    # -- lengths --------------------------------------------------------------------

    def lengths(self, key: str | Callable[[T], int]) -> np.ndarray:
        """One length per record (an int64 array), e.g. for :class:`~stoker.TokenBatchSampler`.

        ``key`` is a column or key name (the length of ``record[key]``) or a function of
        a record. A table source answers for a column without going through records:
        from Arrow's list offsets or string lengths, or its column read in order. Any
        other dataset reads its records (in blocks; seeded maps draw as in epoch 0).

        Example:
            >>> import stoker as sk
            >>> sk.from_sequence([[1, 2], [3], [4, 5, 6]]).lengths(len).tolist()
            [2, 1, 3]

        Errors:
            ConfigError: no such column, or a value without a length.
            NotSupportedError: a filtered dataset (a removed record has no length).
        """
        from ._sources.lengths import record_lengths

        return record_lengths(self, key)

    def _column_lengths(self, key: str) -> Any:
        """Lengths of column ``key`` read from the source itself, or ``NotImplemented``."""
        return NotImplemented

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
    """Base of stages over one parent: its length, :attr:`may_skip`,
    :attr:`releases_gil` and :attr:`shares_process` are the parent's (an index
    stage: shuffle, shard, slice).

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

    def _parent_index(self, index: int, ctx: Context) -> int:
        """The parent's index of this stage's record ``index`` (the same unless
        :attr:`_keeps_indices` is False)."""
        return index

    def _record_name(self, index: int, ctx: Context) -> str | None:
        return self._parent._record_name(self._parent_index(index, ctx), ctx.child(0))

    @property
    def may_skip(self) -> bool:
        return self._parent.may_skip

    @property
    def releases_gil(self) -> bool:
        return self._parent.releases_gil

    @property
    def shares_process(self) -> bool:
        return self._parent.shares_process


# The stage classes import Dataset from this module, so they come last.
from ._transforms.filter import FilterDataset  # noqa: E402
from ._transforms.map import MapDataset  # noqa: E402
from ._transforms.pack import PackDataset  # noqa: E402
from ._transforms.shard import ShardDataset  # noqa: E402
from ._transforms.shuffle import ShuffleDataset  # noqa: E402
