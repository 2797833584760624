"""What the footers of ``from_parquet``'s files say: row groups, schema, sizes.

Read once, when the dataset is built (no data is decoded): the rows of every row
group, the columns chosen (checked against every file's schema), each file's
version (for the decoded copy's key) and about how large the chosen columns are once
decoded (for the decode cache and the decoded copy).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, RemoteReadError
from .decoded_copy import decoded_estimate
from .extras import require
from .remote import Remote

__all__ = ["Layout", "read_layout"]


@dataclass(frozen=True)
class Layout:
    """The files' row groups and schema.

    Attributes:
        sources: each file's ``{"path", "version"}`` (absolute path or URL; size and
            modification time, or what the server reports).
        rows: the rows of every row group, file by file.
        columns: the columns chosen, in record order.
        schema: the first file's Arrow schema.
        group_bytes: the largest row group's chosen columns, decoded (about).
        decoded_bytes: all the chosen columns, decoded (about).
    """

    sources: list[dict[str, Any]]
    rows: list[list[int]]
    columns: list[str]
    schema: Any
    group_bytes: int
    decoded_bytes: int


def read_layout(files: list[str], remote: Remote | None, columns: Any) -> Layout:
    """The :class:`Layout` of ``files`` (local paths, or URLs read through ``remote``).

    Example:
        >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
        >>> pq.write_table(pa.table({"x": [1, 2, 3]}), path, row_group_size=2)
        >>> layout = read_layout([path], None, None)
        >>> layout.rows, layout.columns
        ([[2, 1]], ['x'])

    Errors:
        ConfigError: a missing file, one that is not Parquet, a column missing or of
            another type in a later file, or a column of a type stoker cannot batch.
    """
    pq = require("pyarrow.parquet", "arrow")
    from .arrow_columns import check_schema, pa

    sources: list[dict[str, Any]] = []
    rows: list[list[int]] = []
    group_bytes = 0
    decoded_bytes = 0
    schema: Any = None
    chosen: list[str] = []
    for path in files:
        try:
            if remote is None:
                meta = pq.read_metadata(path)
                stat = os.stat(path)
                version: Any = [stat.st_size, stat.st_mtime_ns]
            else:
                info = remote.info(path)
                version = [info.get("size")] + [
                    str(info[k]) for k in ("mtime", "LastModified", "ETag", "etag") if k in info
                ]
                with remote.open_file(path) as handle:
                    meta = pq.read_metadata(handle)
        except FileNotFoundError as exc:
            raise ConfigError(f"no such file: {path!r}") from exc
        except RemoteReadError:
            raise  # the store failed every try: not a file that is not Parquet
        except (pa.ArrowInvalid, OSError) as exc:
            raise ConfigError(f"{path!r} is not a Parquet file: {exc}") from exc
        full = path if remote is not None else os.path.abspath(path)
        sources.append({"path": full, "version": version})
        file_schema = meta.schema.to_arrow_schema()
        if schema is None:
            schema = file_schema
            chosen = check_schema(schema, columns, f"the Parquet file {path!r}")
        else:
            for name in chosen:
                if name not in file_schema.names:
                    raise ConfigError(
                        f"the Parquet file {path!r} has no column {name!r} (the first file, "
                        f"{files[0]!r}, has it): read files of one schema together"
                    )
                if file_schema.field(name).type != schema.field(name).type:
                    raise ConfigError(
                        f"column {name!r} is {file_schema.field(name).type} in {path!r} but "
                        f"{schema.field(name).type} in {files[0]!r}: read files of one schema "
                        "together, or cast them when writing"
                    )
        groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
        rows.append([group.num_rows for group in groups])
        chosen_bytes = [_chosen_bytes(group, chosen) for group in groups]
        group_bytes = max(group_bytes, *chosen_bytes) if groups else group_bytes
        decoded_bytes += sum(chosen_bytes)
    return Layout(sources, rows, chosen, schema, group_bytes, decoded_bytes)


def _chosen_bytes(group: Any, columns: list[str]) -> int:
    """About the decoded size of ``columns`` in a row group, from its metadata."""
    wanted = set(columns)
    total = 0
    for k in range(group.num_columns):
        chunk = group.column(k)
        if chunk.path_in_schema.split(".")[0] in wanted:
            total += decoded_estimate(chunk)
    return total
