"""``from_jsonl`` and ``from_csv``: records of line-based files, read by a cached index."""

from __future__ import annotations

import csv
import glob
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, NotSupportedError, RecordValueError
from .columns import Column, Columns
from .line_index import record_spans
from .listing import is_glob
from .table import TableDataset
from .values import infer_kind, take_rows, to_column

__all__ = ["CsvDataset", "JsonlDataset", "LinesDataset", "from_csv", "from_jsonl"]

PathLike = str | os.PathLike[str]

SAMPLE_RECORDS = 1000
"""Records looked at to decide each column's kind."""
_DENSE = 4  # read a file's whole span when it is at most this many times the records


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


class LinesDataset(TableDataset):
    """Records of line-based files, one record per line (or per CSV record).

    Subclasses set the columns and kinds and implement ``_parse(raw, where)``: the
    columns of the records whose bytes are ``raw``.

    Resources:
        A batch opens each file it touches once and closes it before returning;
        nothing stays open between batches.
    """

    @property
    def releases_gil(self) -> bool:
        return False  # parsing JSON and CSV is Python work: auto picks processes

    @property
    def shares_process(self) -> bool:
        return True  # stoker's own parsing: it may start on threads while processes start

    def __init__(
        self, paths: list[str], spans: list[np.ndarray], columns: list[str], kinds: list[str]
    ) -> None:
        self._paths = paths
        self._spans = spans
        self._stats = [(os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths]
        self._starts = np.zeros(len(spans) + 1, dtype=np.int64)
        np.cumsum([s.shape[1] for s in spans], out=self._starts[1:])
        self._columns = columns
        self._kinds = kinds

    def __len__(self) -> int:
        return int(self._starts[-1])

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

    def _where(self, index: int) -> str:
        f = int(np.searchsorted(self._starts, index, side="right") - 1)
        offset = int(self._spans[f][0, index - self._starts[f]])
        path = self._paths[f]
        return f"record {index} ({path!r}, line {_line_number(path, offset)})"

    def _read_raw(self, unique: np.ndarray) -> list[bytes]:
        files = np.searchsorted(self._starts, unique, side="right") - 1
        raw: list[bytes] = []
        for f in np.unique(files).tolist():
            rows = unique[files == f] - self._starts[f]
            starts, stops = self._spans[f][0, rows], self._spans[f][1, rows]
            path = self._paths[f]
            with open(path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                if (stat.st_size, stat.st_mtime_ns) != self._stats[f]:
                    raise RuntimeError(
                        f"{path!r} changed after the dataset was built: build it again"
                    )
                fd = handle.fileno()
                first, last = int(starts[0]), int(stops[-1])
                if last - first <= _DENSE * int((stops - starts).sum()) + 4096:
                    block = os.pread(fd, last - first, first)
                    raw.extend(
                        block[a - first : b - first]
                        for a, b in zip(starts.tolist(), stops.tolist(), strict=True)
                    )
                else:
                    raw.extend(
                        os.pread(fd, b - a, a)
                        for a, b in zip(starts.tolist(), stops.tolist(), strict=True)
                    )
        return raw

    def _read_columns(self, indices: np.ndarray) -> Columns:
        unique, inverse = np.unique(indices, return_inverse=True)
        columns = self._parse(self._read_raw(unique), lambda row: self._where(int(unique[row])))
        return {name: take_rows(column, inverse) for name, column in columns.items()}

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


def from_jsonl(paths: PathLike | Sequence[PathLike]) -> JsonlDataset:
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
            object.
    """
    files = line_files(paths, "from_jsonl")
    spans = [record_spans(path)[0] for path in files]
    first = next((f for f, s in enumerate(spans) if s.shape[1]), None)
    if first is None:
        return JsonlDataset(files, spans, [], [])
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
    return JsonlDataset(files, spans, columns, kinds)


class CsvDataset(LinesDataset):
    """Records of CSV files with a header row; built by :func:`from_csv`.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "a.csv")
        >>> with open(path, "w") as f:
        ...     _ = f.write('id,name\\n1,"Smith, J"\\n2,Lee\\n')
        >>> ds = from_csv(path)
        >>> len(ds), int(ds[0]["id"]), ds[0]["name"], ds.kinds
        (2, 1, 'Smith, J', {'id': 'int', 'name': 'str'})
    """

    def __init__(
        self,
        paths: list[str],
        spans: list[np.ndarray],
        columns: list[str],
        kinds: list[str],
        options: dict[str, Any],
        encoding: str,
    ) -> None:
        super().__init__(paths, spans, columns, kinds)
        self._options = options
        self._encoding = encoding

    def _parse(self, raw: list[bytes], where: Callable[[int], str]) -> Columns:
        try:
            rows = list(csv.reader([b.decode(self._encoding) for b in raw], **self._options))
        except (csv.Error, UnicodeDecodeError) as exc:
            raise RecordValueError(f"a record of this batch cannot be read: {exc}") from exc
        width = len(self._columns)
        for row, fields in enumerate(rows):
            if len(fields) != width:
                raise RecordValueError(
                    f"{where(row)} has {len(fields)} fields, the header {width} ({self._columns})"
                )
        values = list(zip(*rows, strict=True)) if rows else [()] * width
        return {
            name: _csv_column(list(column), kind, name, where)
            for name, kind, column in zip(self._columns, self._kinds, values, strict=True)
        }


def _csv_column(values: list[str], kind: str, name: str, where: Callable[[int], str]) -> Column:
    if kind == "str":
        return values
    array = np.array(values, dtype=str)
    empty = np.array([not v.strip() for v in values], dtype=bool)
    if kind == "float":
        array = np.where(empty, "nan", array)
    try:
        if kind == "int" and empty.any():
            raise ValueError
        converted: np.ndarray = array.astype(np.int64 if kind == "int" else np.float64)
        return converted
    except ValueError:
        parse: Callable[[str], Any] = int if kind == "int" else float
        for row, value in enumerate(values):
            try:
                parse(value)
            except ValueError:
                raise RecordValueError(
                    f"column {name!r} holds {value!r} at {where(row)}, not {kind}: pass "
                    f"dtypes={{{name!r}: 'str'}} (or 'float' for missing ints) to from_csv"
                ) from None
        raise


def _csv_kind(values: list[str]) -> str:
    filled = [v for v in values if v.strip()]
    for kind, parse in (("int", int), ("float", float)):
        try:
            for v in filled:
                parse(v)
        except ValueError:
            continue
        if filled:
            return "float" if kind == "int" and len(filled) < len(values) else kind
    return "str"


def from_csv(
    paths: PathLike | Sequence[PathLike],
    *,
    dtypes: Mapping[str, str] | None = None,
    encoding: str = "utf-8",
    **options: Any,
) -> CsvDataset:
    """A map-style dataset over the records of CSV files whose first row is a header.

    Each column is read as int64, float64 or ``str``: ``dtypes`` says which for the
    columns it names; the others are inferred from the first 1000 records (all
    integers -> int64; all numbers -> float64; integers with empty fields -> float64,
    empty as NaN; else ``str``). An empty field in an int64 column is an error.

    Quoted fields may hold newlines: the cached record index (see :func:`from_jsonl`)
    counts quotes, which is exact for CSV's standard quoting (a quote inside a quoted
    field is doubled). An ``escapechar`` or ``doublequote=False`` is not supported.

    Args:
        paths: a file, a glob, or a list of them (in the order given; a glob's
            matches sorted); every file starts with the same header row.
        dtypes: column -> ``"int"``, ``"float"`` or ``"str"``.
        encoding: the files' text encoding.
        **options: passed to :func:`csv.reader` (``delimiter``, ``quotechar``,
            ``skipinitialspace``, ``strict``, ...).

    Returns:
        A :class:`CsvDataset` whose records are dicts column -> value.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "a.tsv")
        >>> with open(path, "w") as f:
        ...     _ = f.write("x\\ty\\n1\\t2.5\\n3\\t\\n")
        >>> ds = from_csv(path, delimiter="\\t", dtypes={"x": "str"})
        >>> ds.kinds, ds[1]["x"], float(ds[1]["y"])
        ({'x': 'str', 'y': 'float'}, '3', nan)

    Errors:
        ConfigError: a missing file, an empty glob, a file without a header, files
            whose headers differ, options ``csv.reader`` refuses, ``dtypes`` naming a
            column that does not exist or a kind other than int, float, str.
        NotSupportedError: ``escapechar`` or ``doublequote=False``.
    """
    try:
        dialect = csv.reader([], **options).dialect
    except (TypeError, csv.Error) as exc:
        raise ConfigError(f"csv.reader refuses the options {options}: {exc}") from exc
    if dialect.escapechar is not None or not dialect.doublequote:
        raise NotSupportedError(
            "from_csv supports CSV's standard quoting only (a quote inside a quoted field "
            "doubled): leave out escapechar and doublequote=False"
        )
    quote: bytes | None = None
    if dialect.quoting != csv.QUOTE_NONE and dialect.quotechar is not None:
        quote = dialect.quotechar.encode(encoding)
        if len(quote) != 1:
            raise NotSupportedError(f"quotechar must be one byte in {encoding}, got {quote!r}")
    files = line_files(paths, "from_csv")
    header: list[str] | None = None
    spans: list[np.ndarray] = []
    sample: list[list[str]] = []
    for path in files:
        file_spans = record_spans(path, quote)[0]
        if not file_spans.shape[1]:
            raise ConfigError(f"{path!r} is empty: a CSV file needs a header row")
        count = min(file_spans.shape[1], SAMPLE_RECORDS + 1)
        with open(path, "rb") as handle:
            raw = [os.pread(handle.fileno(), b - a, a) for a, b in file_spans[:, :count].T.tolist()]
        try:
            rows = list(csv.reader([r.decode(encoding) for r in raw], **options))
        except (csv.Error, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path!r} is not CSV in {encoding}: {exc}") from exc
        if header is None:
            header = rows[0]
            sample = rows[1:]
        elif rows[0] != header:
            raise ConfigError(
                f"the header of {path!r} is {rows[0]}, the first file's {header}: read "
                "files of one header together"
            )
        spans.append(file_spans[:, 1:])
    if header is None or len(set(header)) != len(header):
        raise ConfigError(f"the header {header} names a column twice")
    chosen = dict(dtypes or {})
    for name, kind in chosen.items():
        if name not in header:
            raise ConfigError(f"dtypes names {name!r}, not a column (the columns: {header})")
        if kind not in ("int", "float", "str"):
            raise ConfigError(f"dtypes[{name!r}] must be 'int', 'float' or 'str', got {kind!r}")
    width = len(header)
    kinds = [
        chosen.get(name) or _csv_kind([r[k] for r in sample if len(r) == width])
        for k, name in enumerate(header)
    ]
    return CsvDataset(files, spans, header, kinds, dict(options), encoding)
