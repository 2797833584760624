"""The decoded copy that ``from_parquet`` makes by itself (``cache_dir="auto"``).

A shuffled epoch asks for rows all over a file. When the decoded columns read fit in
the decode cache (``cache_bytes``), each row group is decoded once and kept; when they
do not, every batch would decode again the row groups it touches (a file written
with pyarrow's defaults is one row group: a whole decode per batch). Then, by
default, the first batch read writes a decoded copy of the file once to the local
cache folder (:func:`~stoker._sources.spill.default_cache_dir`), with a progress
bar; every later batch, epoch, run and worker gathers its rows from that copy
mapped in memory (one block per file, ``rows.bin``), whatever the row groups.

This module decides whether a copy is made (:func:`auto_copy_root`: local files, of
columns with a flat form, too large for the decode cache, with room on the disk),
and serialises its making across threads and processes (:func:`building`): the
first to get there writes it while the others wait, then all map it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .columns import columns_nbytes
from .decode_cache import count_decode
from .row_layout import stack_columns
from .spill import SpillFolder, default_cache_dir

__all__ = [
    "PIECE_BYTES",
    "ROOM_FACTOR",
    "auto_copy_root",
    "building",
    "decoded_estimate",
    "flat_type",
    "write_copy",
]

PIECE_BYTES = 64 << 20
"""About the decoded bytes of one piece written at a time (at most a quarter of the
decode cache's budget, and at least 1,024 rows): a row group of any size is decoded
in pieces (``iter_batches``), so writing the copy holds one piece in memory, not a
whole row group (one of pyarrow's default files can be gigabytes)."""

ROOM_FACTOR = 3
"""A copy is made only when the disk has this many times its size free: while it is
written, the row groups' files and the joined ``rows.bin`` exist side by side, and a
copy should not fill the disk."""

_logger = logging.getLogger("stoker")
_threads = threading.Lock()  # one builder at a time in this process; flock orders processes


def flat_type(arrow_type: Any) -> bool:
    """Whether a column of this Arrow type decodes to flat NumPy data (numbers, dates,
    lists of them): the kinds a copy can hold. Strings and binary cannot.

    Example:
        >>> import pyarrow as pa
        >>> flat_type(pa.list_(pa.int32())), flat_type(pa.string())
        (True, False)
    """
    from .arrow_columns import pa

    t = arrow_type
    while True:
        if (
            pa.types.is_dictionary(t)
            or pa.types.is_list(t)
            or pa.types.is_large_list(t)
            or pa.types.is_fixed_size_list(t)
        ):
            t = t.value_type
        else:
            break
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_temporal(t)
    )


_WIDTH = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}


def decoded_estimate(chunk: Any) -> int:
    """About the bytes a column chunk (``pyarrow`` metadata) takes once decoded to
    NumPy: its values at their width (the encoded size understates dictionary- and
    run-length-encoded data), plus 8 bytes a row of offsets for a list.

    Example:
        >>> import pyarrow as pa, pyarrow.parquet as pq, io
        >>> sink = io.BytesIO()
        >>> pq.write_table(pa.table({"x": pa.array([1] * 1000, pa.int64())}), sink)
        >>> chunk = pq.read_metadata(io.BytesIO(sink.getvalue())).row_group(0).column(0)
        >>> decoded_estimate(chunk)
        8000
    """
    width = _WIDTH.get(chunk.physical_type, 0)
    values = int(chunk.num_values) * width
    nested = "." in chunk.path_in_schema  # a list's leaf: "tokens.list.element"
    return max(int(chunk.total_uncompressed_size), values) + (
        8 * int(chunk.num_values) if nested else 0
    )


def auto_copy_root(decoded_bytes: int, cache_bytes: int, flat: bool, local: bool) -> Path | None:
    """The folder for a decoded copy of ``decoded_bytes``, or None when none is made:
    the data fit the decode cache, are not local files, hold strings or binary, or
    the disk lacks room (``ROOM_FACTOR`` times the copy), or the folder cannot be made.

    Example:
        >>> auto_copy_root(10, cache_bytes=100, flat=True, local=True) is None
        True
    """
    if not local or not flat or decoded_bytes <= cache_bytes:
        return None
    root = default_cache_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(root).free
    except OSError:
        return None
    if free < ROOM_FACTOR * decoded_bytes:
        _logger.info(
            "stoker: no decoded copy of %.1f GB at %s (%.1f GB free); pass cache_dir= a "
            "folder with room, or a larger cache_bytes",
            decoded_bytes / 1e9,
            root,
            free / 1e9,
        )
        return None
    return root


@contextlib.contextmanager
def building(folder: Path) -> Iterator[None]:
    """Hold the right to write the copy in ``folder``: one thread of this process and
    one process of this machine at a time (an advisory lock on ``folder/.lock``,
    released when the holder ends, even by a crash)."""
    with _threads:
        try:
            import fcntl
        except ImportError:  # no advisory locks (Windows): writes stay atomic renames
            yield
            return
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock


def progress_bar(total: int, what: str) -> Any:
    """A tqdm bar of ``total`` rows for writing the copy (drawn on a terminal only),
    and the same said once to the ``stoker`` logger."""
    from tqdm import tqdm

    _logger.info("stoker: %s", what)
    return tqdm(total=total, unit="rows", unit_scale=True, desc=what, disable=None, leave=False)


def write_copy(
    open_file: Callable[[int], Any],
    file_rows: list[int],
    file_groups: list[int],
    spills: list[SpillFolder],
    columns: list[str],
    group_bytes: int,
    cache_bytes: int,
) -> int:
    """Write each file's decoded copy (``rows.bin``) into its folder, with a progress bar.

    File ``f`` (``open_file(f)``: its ``pyarrow.parquet.ParquetFile``) is decoded in
    pieces of about :data:`PIECE_BYTES` or a quarter of ``cache_bytes`` (``group_bytes``
    is the largest row group, decoded), each written as one numbered file, then
    joined into ``rows.bin`` and removed. A file whose copy exists is skipped; one
    that cannot be written (a full disk) is left without a copy, its pieces removed.
    Returns the row groups decoded.
    """
    from .arrow_columns import pa, table_columns

    total = sum(rows for rows, spill in zip(file_rows, spills, strict=True) if not _done(spill))
    what = f"decoding {total:,} rows once into {spills[0].root}"
    decoded = 0
    with progress_bar(total, what) as bar:
        for f, spill in enumerate(spills):
            if _done(spill):
                continue
            group_rows = max(1, file_rows[f] // max(1, file_groups[f]))
            piece_bytes = min(PIECE_BYTES, cache_bytes // 4)
            piece = max(1024, group_rows * piece_bytes // max(1, group_bytes))
            pieces = 0
            batches = open_file(f).iter_batches(batch_size=piece, columns=columns)
            for batch in batches:
                block = stack_columns(table_columns(pa.Table.from_batches([batch])))
                count_decode(columns_nbytes(block), again=False)
                written = spill.save(pieces, block)
                pieces += 1
                if not written:
                    break
                bar.update(batch.num_rows)
            else:
                spill.write_rows(pieces)
            spill.drop_groups(pieces)  # joined in rows.bin, or no copy
            decoded += file_groups[f]
    return decoded


def _done(spill: SpillFolder) -> bool:
    return spill.load_rows() is not None
