"""The schema side of ``from_sqlite``: parameters, column kinds, quoting.

A column's kind (int, float, str or bytes) comes from its declared type (SQLite's type
affinity) or, where that says nothing, from the values of its first rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "SAMPLE_ROWS",
    "Params",
    "check_params",
    "column_kinds",
    "quote",
    "rowid_alias",
    "rowid_name",
]

Params = Sequence[Any] | Mapping[str, Any]

SAMPLE_ROWS = 1000
"""Rows looked at to decide the kind of a column whose declared type does not."""
_TYPEOF = {"integer": "int", "real": "float", "text": "str", "blob": "bytes"}
_FITS = {"int": {"int"}, "float": {"int", "float"}, "str": {"str"}, "bytes": {"bytes"}}


def quote(name: str) -> str:
    """``name`` as an SQL identifier.

    Example:
        >>> print(quote("my table"))
        "my table"
    """
    return '"' + name.replace('"', '""') + '"'


def _declared_kind(declared: str) -> str | None:
    """The kind of SQLite's type affinity for a declared column type (None: NUMERIC/none)."""
    text = declared.upper()
    if "INT" in text:
        return "int"
    if any(word in text for word in ("CHAR", "CLOB", "TEXT")):
        return "str"
    if "BLOB" in text:
        return "bytes"
    if any(word in text for word in ("REAL", "FLOA", "DOUB")):
        return "float"
    return None


def rowid_name(columns: Sequence[str]) -> str | None:
    """A name of the rowid that no column shadows (None: all three are taken)."""
    taken = {c.lower() for c in columns}
    return next((n for n in ("rowid", "_rowid_", "oid") if n not in taken), None)


def rowid_alias(conn: sqlite3.Connection, table: str) -> str | None:
    """The column of rowid table ``table`` (quoted) that is its rowid, if any.

    A lone ``INTEGER PRIMARY KEY`` is another name for the rowid, except in the form
    ``INTEGER PRIMARY KEY DESC``, where SQLite keeps it in an index of its own (an
    index whose origin is ``pk``); so is no other primary key.

    Example:
        >>> import sqlite3
        >>> conn = sqlite3.connect(":memory:")
        >>> _ = conn.execute("CREATE TABLE a (id INTEGER PRIMARY KEY, x REAL)")
        >>> _ = conn.execute("CREATE TABLE b (id INT PRIMARY KEY, x REAL)")
        >>> rowid_alias(conn, "a"), rowid_alias(conn, "b")
        ('id', None)
    """
    keys = [row for row in conn.execute(f"PRAGMA table_info({table})") if row[5]]
    if len(keys) != 1 or keys[0][2].upper() != "INTEGER":
        return None
    if any(row[3] == "pk" for row in conn.execute(f"PRAGMA index_list({table})")):
        return None
    name: str = keys[0][1]
    return name


def check_params(params: Any) -> Params:
    """``params`` as a tuple or a dict of SQL values, or a ConfigError saying what is allowed."""
    scalar = (type(None), int, float, str, bytes)
    if isinstance(params, Mapping):
        if all(isinstance(k, str) for k in params) and all(
            isinstance(v, scalar) for v in params.values()
        ):
            return dict(params)
    elif isinstance(params, list | tuple) and all(isinstance(v, scalar) for v in params):
        return tuple(params)
    raise ConfigError(
        f"params must be a tuple of values or a dict of named values (None, int, float, "
        f"str or bytes), got {params!r}"
    )


def column_kinds(
    conn: sqlite3.Connection, source: str, params: Params, columns: list[str], declared: list[str]
) -> list[str]:
    typeofs = ", ".join(f"typeof({quote(c)})" for c in columns)
    sample = conn.execute(f"SELECT {typeofs} FROM ({source}) LIMIT {SAMPLE_ROWS}", params)
    seen: list[set[str]] = [set() for _ in columns]
    for row in sample:
        for found, typ in zip(seen, row, strict=True):
            found.add(typ)
    kinds = []
    for name, decl, found in zip(columns, declared, seen, strict=True):
        types = {_TYPEOF[t] for t in found if t in _TYPEOF}
        kind = _declared_kind(decl)
        if kind is None:
            if types <= {"int", "float"} and types:
                kind = "float" if "float" in types else "int"
            elif len(types) == 1:
                kind = types.pop()
            elif not types:
                raise ConfigError(
                    f"column {name!r} is NULL in the first {SAMPLE_ROWS} rows and declares "
                    "no type: cast it in a query (CAST(x AS REAL)) so its kind is known"
                )
        if kind is None or not types <= _FITS[kind]:
            raise ConfigError(
                f"column {name!r} ({decl or 'no declared type'}) holds values of several "
                f"types ({', '.join(sorted(found - {'null'}))}): a batch needs one; cast it "
                f"in a query, e.g. SELECT CAST({quote(name)} AS REAL) ..."
            )
        kinds.append(kind)
    return kinds
