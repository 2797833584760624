"""``pack``: variable-length records packed into fixed-length rows, in sampler order.

A packed dataset is read by the loader like a filtered one: records are read ahead
in chunks (on workers, when there are any), and the parent builds each batch from
the next records in sampler order. Its :class:`Packer` puts every record into the
first of the batch's rows that has room for it (first fit); the first record that
fits in none of them starts the next batch. A batch is therefore always a
contiguous run of sampler positions, and the loader's state after it (the sampler
position just after its last record) resumes exactly, as for a filter.

Records of a table source whose list columns are exactly the packed fields (Parquet
token lists, say) are read column by column: a chunk is a :class:`PackChunk`, whose
values and offsets let the :class:`Packer` run first fit over the chunk's lengths
and write each record into the batch's 2-D arrays with one slice copy per field,
with no record dict looked at; other records (``from_sequence``, a ``map``) are
checked one by one. Both give the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np

from .._context import SKIP, Context, Skip
from .._dataset import Dataset, UnaryNode
from .._iterdataset import IterDataset
from .._sources.columns import Ragged, column_records
from ..errors import CollateError, ConfigError, NotSupportedError
from .packer import OVERFLOWS, POSITIONS, SEGMENT_IDS, PackChunk, Packer, Row, checked_length

__all__ = ["PackDataset", "pack"]


def pack(
    ds: Dataset[Any] | IterDataset[Any],
    length: int,
    fields: Sequence[str] | str = ("tokens",),
    *,
    pad_value: Any = 0,
    overflow: str = "truncate",
) -> Dataset[Row]:
    """Pack variable-length records into rows of exactly ``length`` tokens.

    Every record must be a dict whose ``fields`` are 1-D sequences of equal length
    (NumPy arrays or lists: token ids, labels, loss weights). A row is a dict with
    each field padded with ``pad_value``, plus ``"segment_ids"`` (int32: 1, 2, ...
    for the records in the row, 0 for padding) and ``"positions"`` (int32: the
    position of each token within its record, 0 for padding). Records go, in the
    sampler's order, into the first row of the batch with room for them; a batch of
    ``batch_size`` rows ends at the first record that fits in none of its rows, which
    starts the next one. The packing thus depends only on (seed, epoch), never on
    workers, and the loader's state resumes it exactly.

    Use it as the last stage of a pipeline (``map`` and ``filter`` go before it; the
    loader's ``collate_fn`` gets the rows), with a loader over one host (not
    ``shard=``). ``len()`` stays that of ``ds`` (an upper bound on the number of rows,
    as for a filter), so ``len(loader)`` is a ``TypeError``; ``ds[i]`` is refused.

    Args:
        ds: a map-style dataset of dict records.
        length: the number of tokens in a row.
        fields: the names of the fields to pack (one name, or several of equal length
            per record). The records must have no other fields: select them in a
            ``map`` first.
        pad_value: the fill of the packed fields: a scalar, or a dict field -> scalar
            (fields it does not name get 0).
        overflow: what happens to a record longer than ``length``. ``"truncate"``
            (default): its first ``length`` tokens are kept, the rest dropped.
            ``"split"``: it is cut into pieces of ``length`` tokens (the last one
            shorter), each packed as a record of its own (positions restart at 0),
            all in the same batch; a record longer than ``batch_size * length`` is
            then a :class:`~stoker.CollateError`.

    Returns:
        The packed dataset, for ``sk.DataLoader``.

    Example:
        >>> import stoker as sk
        >>> ds = sk.from_sequence([{"tokens": [1, 2, 3]}, {"tokens": [4, 5]}, {"tokens": [6]}])
        >>> batch = next(iter(sk.DataLoader(sk.pack(ds, length=4), batch_size=2)))
        >>> batch["tokens"].tolist()
        [[1, 2, 3, 6], [4, 5, 0, 0]]
        >>> batch["segment_ids"].tolist(), batch["positions"].tolist()
        ([[1, 1, 1, 2], [1, 1, 0, 0]], [[0, 1, 2, 0], [0, 1, 0, 0]])

    Errors:
        ConfigError: a ``length`` that is not an int >= 1, no ``fields``, a field
            named ``"segment_ids"`` or ``"positions"``, an unknown ``overflow``, or a
            dict ``pad_value`` naming fields that are not packed.
        NotSupportedError: ``ds`` is a stream (``IterDataset``).
        CollateError: while loading, a record that is not a dict of exactly
            ``fields``, whose fields are not 1-D numeric sequences of equal length.
    """
    if isinstance(ds, IterDataset):
        raise NotSupportedError(
            "pack() needs a map-style dataset: a stream's records cannot be re-read "
            "to resume inside a batch; load the stream into a map-style source first"
        )
    if not isinstance(ds, Dataset):
        raise TypeError(f"pack() needs a stoker Dataset, got {type(ds).__name__}")
    return PackDataset(ds, length, fields, pad_value=pad_value, overflow=overflow)


class PackDataset(UnaryNode[Row]):
    """The parent's records, checked and made arrays, for a loader to pack into rows.

    Built by :func:`pack` (see there); the loader asks it for a :class:`Packer`.
    Its records are the parent's, each a dict of 1-D arrays (truncated to ``length``
    under ``overflow="truncate"``), made on workers when there are any.

    Example:
        >>> import stoker as sk
        >>> packed = sk.range(3).map(lambda i: {"tokens": [i] * (i + 1)}).pack(4)
        >>> len(packed)
        3

    Errors:
        NotSupportedError: ``ds[i]``, or chaining a stage after it.
    """

    def __init__(
        self,
        parent: Dataset[Any],
        length: int,
        fields: Sequence[str] | str = ("tokens",),
        *,
        pad_value: Any = 0,
        overflow: str = "truncate",
    ) -> None:
        row_length = checked_length(length)
        names = (fields,) if isinstance(fields, str) else tuple(fields)
        if not names or not all(isinstance(f, str) for f in names):
            raise ConfigError(f"pack() needs fields: one or more field names, got {fields!r}")
        clash = sorted({SEGMENT_IDS, POSITIONS} & set(names))
        if clash:
            raise ConfigError(
                f"pack() adds {SEGMENT_IDS!r} and {POSITIONS!r} to each row: rename the "
                f"field(s) {clash} in a map first"
            )
        if overflow not in OVERFLOWS:
            raise ConfigError(f"overflow must be one of {OVERFLOWS}, got {overflow!r}")
        if isinstance(pad_value, Mapping):
            unknown = sorted(set(pad_value) - set(names), key=str)
            if unknown:
                raise ConfigError(f"pad_value names {unknown}, which are not packed: {names}")
            fills = {f: pad_value.get(f, 0) for f in names}
        else:
            fills = dict.fromkeys(names, pad_value)
        super().__init__(parent)
        self._length = row_length
        self._fields: tuple[str, ...] = names
        self._fills: dict[str, Any] = fills
        self._split: bool = overflow == "split"

    @property
    def may_skip(self) -> bool:
        return True  # read like a filter: ahead, in chunks, batches built in order

    def _packer(self, rows: int) -> Packer:
        return Packer(self._length, self._fields, self._fills, rows, split=self._split)

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[Row | Skip]:
        parent = ctx.child(0)
        columns = self._parent._fetch_columns(indices, parent)
        if columns is NotImplemented:
            records: list[Any] = self._parent._fetch(indices, parent)
        else:
            chunk = self._chunk(columns)
            if chunk is not None:
                return chunk
            records = column_records(columns)  # checked one by one, to say what is wrong
        return [r if r is SKIP else self._checked(r) for r in records]

    def _chunk(self, columns: dict[str, Any]) -> PackChunk | None:
        """The records of a table source's columns as a :class:`PackChunk`, when they are
        exactly ``fields``, as list columns of numbers of equal lengths; else None."""
        fields = self._fields
        if len(columns) != len(fields) or not all(
            isinstance(columns.get(f), Ragged) for f in fields
        ):
            return None
        ragged: list[Ragged] = [columns[f] for f in fields]
        if not all(c.values.ndim == 1 and c.values.dtype.kind in "biuf" for c in ragged):
            return None
        offsets = ragged[0].offsets
        lengths = np.diff(offsets)
        if any(not np.array_equal(np.diff(c.offsets), lengths) for c in ragged[1:]):
            return None
        # Each field's values from its first record on: the records start at the same places.
        arrays = tuple(c.values[int(c.offsets[0]) : int(c.offsets[-1])] for c in ragged)
        starts = (offsets[:-1] - offsets[0]).tolist()
        if not self._split:
            lengths = np.minimum(lengths, self._length)
        return PackChunk(fields, arrays, starts, lengths.tolist())

    def _checked(self, record: Any) -> Row:
        fields = self._fields
        if not isinstance(record, Mapping) or set(record) != set(fields):
            got = sorted(record, key=str) if isinstance(record, Mapping) else type(record).__name__
            raise CollateError(
                f"pack() packs records that are dicts of exactly the fields {list(fields)}, "
                f"got {got}; select those fields in a map before pack(), or name every "
                "per-token field in fields="
            )
        out: Row = {}
        n = -1
        for f in fields:
            a = np.asarray(record[f])
            if a.ndim != 1 or (a.dtype.kind not in "biuf" and a.size):
                raise CollateError(
                    f"pack() needs {f!r} to be a 1-D sequence of numbers, got an array of "
                    f"shape {a.shape} and dtype {a.dtype}"
                )
            if n >= 0 and len(a) != n:
                raise CollateError(
                    f"pack() needs the fields {list(fields)} of a record to be equally long, "
                    f"got {n} and {len(a)} tokens ({f!r})"
                )
            n = len(a)
            out[f] = a if self._split or n <= self._length else a[: self._length]
        return out

    def __getitem__(self, index: int) -> NoReturn:
        raise NotSupportedError(
            "a packed dataset has no record i: its rows are built in the loader's order; "
            "iterate it with sk.DataLoader(packed, batch_size=...)"
        )

    def __getitems__(self, indices: Sequence[int]) -> NoReturn:
        self.__getitem__(0)

    def _refuse(self, what: str) -> NoReturn:
        raise NotSupportedError(
            f"pack() must be the last stage: apply {what} before pack(), or change the "
            "packed batches in the loader's collate_fn"
        )

    def map(self, fn: Callable[..., Any], *, seeded: bool = False) -> NoReturn:
        self._refuse("map")

    def filter(self, pred: Callable[[Row], bool]) -> NoReturn:
        self._refuse("filter")

    def shuffle(self, seed: int) -> NoReturn:
        self._refuse("shuffle")

    def shard(self, index: int, count: int) -> NoReturn:
        self._refuse("shard")

    def pack(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("pack")

    def __repr__(self) -> str:
        return f"PackDataset(len={len(self)}, length={self._length}, fields={self._fields})"
