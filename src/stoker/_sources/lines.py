"""``from_jsonl``: records of line-based files, read by a cached index (``from_csv`` in
:mod:`stoker._sources.csv_lines`)."""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np

from ..errors import ConfigError, RecordValueError
from .blocks import BlockTable, check_cache_bytes, source_name
from .columns import Columns
from .decode_cache import DEFAULT_CACHE_BYTES
from .line_index import record_spans
from .listing import is_glob
from .row_layout import stack_columns
from .values import infer_kind, take_rows, to_column

__all__ = ["JsonlDataset", "LinesDataset", "from_jsonl", "line_files"]

PathLike = str | os.PathLike[str]

SAMPLE_RECORDS = 1000
"""Records looked at to decide each column's kind."""
_DENSE = 4  # read a file's whole span when it is at most this many times the records
BLOCK_BYTES = 1 << 20
"""About how much text one block of records holds (see :class:`LinesDataset`)."""
_BLOCK_ROWS = (64, 65536)  # the fewest and most records in a block


def line_files(paths: PathLike | Sequence[PathLike], what: str) -> list[str]:
    """The files that ``paths`` (a path, a glob, or a list of them) names: a list in
    the order given, a glob's matches in sorted order.

    Example:
        >>> line_files([], "from_jsonl")
        Traceback (most recent call last):
        ...
        stoker.errors.ConfigError: from_jsonl() needs at least one path or glob
    """
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    if not items:
        raise ConfigError(f"{what}() needs at least one path or glob")
    found: list[str] = []
    for item in items:
        text = os.fspath(item)
        if is_glob(text):
            files = sorted(m for m in glob.glob(text, recursive=True) if os.path.isfile(m))
            if not files:
                raise ConfigError(f"the pattern {text!r} matches no file (check the path)")
            found.extend(files)
        elif os.path.isdir(text):
            raise ConfigError(f"{text!r} is a directory: pass a glob such as {text}/*")
        elif os.path.isfile(text):
            found.append(text)
        else:
            raise ConfigError(f"no such file: {text!r}")
    return found


def _line_number(path: str, offset: int) -> int:
    with open(path, "rb") as f:
        return f.read(offset).count(b"\n") + 1


class LinesDataset(BlockTable):
    """Records of line-based files, one record per line (or per CSV record).

    Subclasses set the columns and kinds and implement ``_parse(raw, where)``: the
    columns of the records whose bytes are ``raw``.

    Blocks (see :class:`~stoker._sources.blocks.BlockTable`): runs of consecutive
    records of one file, about 1 MiB of text each. A batch whose records fall in few
    blocks (a sequential read, :meth:`shuffle_sampler`) reads and parses each block
    it touches whole, once, and keeps it in the process's decode cache; a batch
    spread over many blocks (``shuffle=True``) reads only its own records, each with
    one ``pread``, unless every block it touches is held. A block holding a record
    that cannot be parsed is read record by record from then on, so the error names
    the record of the batch that reads it.

    Resources:
        A batch opens each file it touches once and closes it before returning;
        nothing stays open between batches.
    """

    _reads_rows: ClassVar[bool] = True
    _block_unit: ClassVar[str] = "runs of lines"
    _maker: ClassVar[str] = "from_jsonl"

    @property
    def releases_gil(self) -> bool:
        return False  # parsing JSON and CSV is Python work: auto picks processes

    @property
    def shares_process(self) -> bool:
        return True  # stoker's own parsing: it may start on threads while processes start

    def __init__(
        self,
        paths: list[str],
        spans: list[np.ndarray],
        columns: list[str],
        kinds: list[str],
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._paths = paths
        self._spans = spans
        self._stats = [(os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths]
        self._file_starts = np.zeros(len(spans) + 1, dtype=np.int64)
        np.cumsum([s.shape[1] for s in spans], out=self._file_starts[1:])
        self._columns = columns
        self._kinds = kinds
        records = int(self._file_starts[-1])
        text = sum(int(s[1, -1] - s[0, 0]) for s in spans if s.shape[1])
        low, high = _BLOCK_ROWS
        rows = min(high, max(low, BLOCK_BYTES * records // max(text, 1)))
        sizes: list[int] = []
        self._blocks_at: list[tuple[int, int]] = []  # block -> (file, its first row there)
        for f, s in enumerate(spans):
            for first in range(0, s.shape[1], rows):
                sizes.append(min(rows, s.shape[1] - first))
                self._blocks_at.append((f, first))
        self._set_blocks(sizes, cache_bytes)

    def __len__(self) -> int:
        return int(self._file_starts[-1])

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    @property
    def kinds(self) -> dict[str, str]:
        """The kind each column's values are read as (see ``stoker._sources.values``)."""
        return dict(zip(self._columns, self._kinds, strict=True))

    @property
    def paths(self) -> list[str]:
        """The files read, in order."""
        return list(self._paths)

    def _source_name(self) -> str:
        return source_name(self._maker, self._paths)

    def _where(self, index: int) -> str:
        f = int(np.searchsorted(self._file_starts, index, side="right") - 1)
        offset = int(self._spans[f][0, index - self._file_starts[f]])
        path = self._paths[f]
        return f"record {index} ({path!r}, line {_line_number(path, offset)})"

    def _read_raw(self, unique: np.ndarray) -> list[bytes]:
        files = np.searchsorted(self._file_starts, unique, side="right") - 1
        raw: list[bytes] = []
        for f in np.unique(files).tolist():
            rows = unique[files == f] - self._file_starts[f]
            raw.extend(self._pread(f, self._spans[f][0, rows], self._spans[f][1, rows]))
        return raw

    def _pread(self, f: int, starts: np.ndarray, stops: np.ndarray) -> list[bytes]:
        """The bytes of the records of file ``f`` at ``starts``/``stops`` (ascending)."""
        path = self._paths[f]
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            if (stat.st_size, stat.st_mtime_ns) != self._stats[f]:
                raise RuntimeError(f"{path!r} changed after the dataset was built: build it again")
            fd = handle.fileno()
            first, last = int(starts[0]), int(stops[-1])
            pairs = zip(starts.tolist(), stops.tolist(), strict=True)
            if last - first <= _DENSE * int((stops - starts).sum()) + 4096:
                block = os.pread(fd, last - first, first)
                return [block[a - first : b - first] for a, b in pairs]
            return [os.pread(fd, b - a, a) for a, b in pairs]

    def _read_rows(self, indices: np.ndarray) -> Columns:
        unique, inverse = np.unique(indices, return_inverse=True)
        columns = self._parse(self._read_raw(unique), lambda row: self._where(int(unique[row])))
        return {name: take_rows(column, inverse) for name, column in columns.items()}

    def _read_block(self, block: int) -> Columns:
        f, first = self._blocks_at[block]
        stop = first + int(self._starts[block + 1] - self._starts[block])
        spans = self._spans[f]
        raw = self._pread(f, spans[0, first:stop], spans[1, first:stop])
        at = int(self._file_starts[f]) + first
        return stack_columns(self._parse(raw, lambda row: self._where(at + row)))

    def _parse(self, raw: list[bytes], where: Callable[[int], str]) -> Columns:
        raise NotImplementedError


class JsonlDataset(LinesDataset):
    """Records of JSON Lines files (one JSON object a line); built by :func:`from_jsonl`.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
        >>> with open(path, "w") as f:
        ...     _ = f.write('{"id": 1, "tokens": [1, 2]}\\n{"id": 2, "tokens": [3]}\\n')
        >>> ds = from_jsonl(path)
        >>> len(ds), int(ds[1]["id"]), ds[1]["tokens"].tolist(), ds.kinds["tokens"]
        (2, 2, [3], 'list[int]')
    """

    def _parse(self, raw: list[bytes], where: Callable[[int], str]) -> Columns:
        records = []
        for row, line in enumerate(raw):
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise RecordValueError(f"{where(row)} is not valid JSON: {exc}") from exc
            if not isinstance(record, dict):
                raise RecordValueError(f"{where(row)} is not a JSON object")
            records.append(record)
        columns: Columns = {}
        for name, kind in zip(self._columns, self._kinds, strict=True):
            try:
                values = [r[name] for r in records]
            except KeyError:
                row = next(i for i, r in enumerate(records) if name not in r)
                raise RecordValueError(
                    f"{where(row)} has no key {name!r} (the first record's keys are "
                    f"{self._columns}): give every record the same keys"
                ) from None
            columns[name] = to_column(values, kind, name, where)
        return columns


def from_jsonl(
    paths: PathLike | Sequence[PathLike], *, cache_bytes: int = DEFAULT_CACHE_BYTES
) -> JsonlDataset:
    """A map-style dataset over the records of JSON Lines files.

    Every non-blank line is one JSON object; its columns are the first record's keys
    (other keys are ignored; a record missing one is an error naming its line). Each
    column's kind is decided from the first 1000 records: integers -> int64, numbers
    -> float64 (``null`` as NaN), booleans -> bool, strings -> ``str``, lists of
    numbers -> 1-D arrays (int64 or float64), anything else -> Python values.

    Records are found through a line index built once (vectorised) and cached beside
    the file (``.<name>.stoker-index.npy``) or in ``~/.cache/stoker/index``; it is
    rebuilt when the file's size or modification time changes.

    Args:
        paths: a file, a glob, or a list of them (read in the order given; a glob's
            matches in sorted order).
        cache_bytes: the most this dataset's decoded blocks (runs of lines) take in the
            decode cache of each process that reads it (default 256 MiB); the
            process's one cache holds all its table sources' blocks within the
            largest of their ``cache_bytes``.

    Returns:
        A :class:`JsonlDataset` whose records are dicts key -> value.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
        >>> with open(path, "w") as f:
        ...     _ = f.write('{"x": 1.5, "s": "a"}\\n{"x": null, "s": "b"}\\n')
        >>> [(float(r["x"]), r["s"]) for r in from_jsonl(path).__getitems__([1, 0])]
        [(nan, 'b'), (1.5, 'a')]

    Errors:
        ConfigError: a missing file, an empty glob, a first record that is not a JSON
            object, a ``cache_bytes`` that is not an int >= 0.
    """
    check_cache_bytes(cache_bytes)
    files = line_files(paths, "from_jsonl")
    spans = [record_spans(path)[0] for path in files]
    first = next((f for f, s in enumerate(spans) if s.shape[1]), None)
    if first is None:
        return JsonlDataset(files, spans, [], [], cache_bytes)
    path = files[first]
    with open(path, "rb") as handle:
        sample_spans = spans[first][:, :SAMPLE_RECORDS].T.tolist()
        lines = [os.pread(handle.fileno(), b - a, a) for a, b in sample_spans]
    try:
        sample = [json.loads(line) for line in lines]
    except ValueError as exc:
        raise ConfigError(f"{path!r} is not JSON Lines: {exc}") from exc
    if not isinstance(sample[0], dict):
        raise ConfigError(f"the first record of {path!r} is not a JSON object: {lines[0]!r:.80}")
    columns = list(sample[0])
    kinds = []
    for name in columns:
        kind = infer_kind([r.get(name) for r in sample if isinstance(r, dict)])
        kinds.append("object" if kind is None else kind)
    return JsonlDataset(files, spans, columns, kinds, cache_bytes)
