"""``from_csv``: records of CSV files, read by a cached index like ``from_jsonl``."""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError, NotSupportedError, RecordValueError
from .blocks import check_cache_bytes
from .columns import Column, Columns
from .decode_cache import DEFAULT_CACHE_BYTES
from .line_index import record_spans
from .lines import SAMPLE_RECORDS, LinesDataset, line_files

__all__ = ["CsvDataset", "from_csv"]

PathLike = str | os.PathLike[str]


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

    _maker: ClassVar[str] = "from_csv"

    def __init__(
        self,
        paths: list[str],
        spans: list[np.ndarray],
        columns: list[str],
        kinds: list[str],
        options: dict[str, Any],
        encoding: str,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        super().__init__(paths, spans, columns, kinds, cache_bytes)
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
    cache_bytes: int = DEFAULT_CACHE_BYTES,
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
        cache_bytes: the most this dataset's decoded blocks (runs of lines) take in the
            decode cache of each process that reads it (default 256 MiB); the
            process's one cache holds all its table sources' blocks within the
            largest of their ``cache_bytes``.
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
            column that does not exist or a kind other than int, float, str, a
            ``cache_bytes`` that is not an int >= 0.
        NotSupportedError: ``escapechar`` or ``doublequote=False``.
    """
    check_cache_bytes(cache_bytes)
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
    return CsvDataset(files, spans, header, kinds, dict(options), encoding, cache_bytes)
