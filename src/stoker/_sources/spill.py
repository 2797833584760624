"""Decoded row groups kept on local disk, memory-mapped on later reads.

A Parquet file larger than the decode cache is decoded again every epoch. With a
cache folder (``from_parquet(..., cache_dir=...)``), each row group is decoded once,
ever, and written there as raw NumPy data (a small JSON header, then every array at
a 64-byte aligned offset: numeric columns, the 2-D blocks of numeric columns of one
dtype, values and offsets of list columns). Later reads map the file and view its
arrays without copying, so a later epoch reads decoded data from the operating
system's page cache, as HuggingFace ``datasets`` does with its Arrow copy.

Layout: ``<cache_dir>/<key>/rg-<n>.bin``, where ``key`` is a hash of the file's path
(or URL), size, modification time and the columns read; ``source.json`` in the same
folder names them. A folder of the same path under another key (the file changed, or
other columns) is removed when the dataset is built, so the folder holds at most one
decoded copy of each file and column selection: about the decoded size of the
columns read. Row groups with string or binary columns are not written (they have no
flat NumPy form) and stay in the memory cache only.

Writers never expose a partial file: each row group is written to a temporary file
in the same folder and renamed into place, so concurrent workers and processes can
share one folder (two that decode the same row group at once both write it; the last
rename wins, and both files are identical).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .columns import Columns, Ragged
from .row_layout import StackedColumns, stacked_field

__all__ = ["SpillFolder", "default_cache_dir", "spill_key"]

_MAGIC = b"STKRG002"
_LAYOUT = 2
"""The file layout's version, part of the folder's key: a new layout gets a new folder
(and :meth:`SpillFolder.prepare` removes the old one)."""
_ALIGN = 64


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/stoker/parquet`` (default ``~/.cache/stoker/parquet``).

    Example:
        >>> default_cache_dir().parts[-2:]
        ('stoker', 'parquet')
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stoker" / "parquet"


def spill_key(source: dict[str, Any]) -> str:
    """The folder name for ``source`` (path, size, mtime, columns): a hash of its JSON.

    Example:
        >>> len(spill_key({"path": "/a.parquet", "size": 1, "mtime": 2, "columns": ["x"]}))
        32
    """
    text = json.dumps(source, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _settle(header: dict[str, Any], sizes: list[int]) -> bytes:
    """The header's bytes, with each array's ``offset`` set: 64-byte aligned, after
    the header (whose length moves them: settle both)."""
    prefix = len(_MAGIC) + 8
    start = 0
    while True:
        position = start
        for spec, nbytes in zip(header["arrays"], sizes, strict=True):
            spec["offset"] = position
            position = _aligned(position + nbytes)
        head = json.dumps(header).encode()
        if _aligned(prefix + len(head)) <= start:
            return head
        start = _aligned(prefix + len(head))


def _header_of(f: Any) -> dict[str, Any] | None:
    """The header at the start of open file ``f`` written by :class:`SpillFolder`, or
    None when it is another file; ``ValueError`` when it is cut short."""
    if f.read(len(_MAGIC)) != _MAGIC:
        return None
    size = int.from_bytes(f.read(8), "little")
    header: dict[str, Any] = json.loads(f.read(size))
    return header


def _read_header(path: Path) -> dict[str, Any] | None:
    """The header of a file written by :class:`SpillFolder`, or None (missing, other)."""
    try:
        with open(path, "rb") as f:
            return _header_of(f)
    except (OSError, ValueError):
        return None


def _spillable(columns: Columns) -> bool:
    return all(
        isinstance(c, Ragged) or (isinstance(c, np.ndarray) and c.dtype != object)
        for c in columns.values()
    )


class SpillFolder:
    """The decoded row groups of one Parquet file (one column selection) on disk.

    A description: it holds the folder's path and what it stands for, and pickles as
    that. :meth:`prepare` (called once, when the dataset is built) creates the folder
    and removes the folders of older versions of the same file.

    Example:
        >>> import numpy as np, tempfile
        >>> from stoker._sources.columns import Ragged
        >>> folder = SpillFolder(tempfile.mkdtemp(), {"path": "a", "size": 1, "mtime": 0})
        >>> folder.prepare()
        >>> cols = {"x": np.arange(3.0), "t": Ragged(np.arange(4), np.array([0, 1, 1, 4]))}
        >>> folder.save(0, cols)
        True
        >>> back = folder.load(0)
        >>> back["x"].tolist(), [r.tolist() for r in back["t"].rows()]
        ([0.0, 1.0, 2.0], [[0], [], [1, 2, 3]])

    Resources:
        A loaded row group holds one read-only memory map (and its file descriptor)
        until the last array viewing it is collected.

    Errors:
        ``save`` returns False when the folder cannot be written (full or read-only
        disk); the caller keeps the decoded row group in memory instead.
    """

    def __init__(self, root: str | os.PathLike[str], source: dict[str, Any]) -> None:
        self.root = Path(root)
        self.source = {**source, "layout": _LAYOUT}
        self.folder = self.root / spill_key(self.source)

    def prepare(self) -> None:
        """Create the folder; remove the folders of other versions of the same file."""
        self.root.mkdir(parents=True, exist_ok=True)
        for other in self.root.iterdir():
            if other == self.folder or not other.is_dir():
                continue
            try:
                described = json.loads((other / "source.json").read_text())
            except (OSError, ValueError):
                continue
            if described.get("path") == self.source["path"] and described.get(
                "columns"
            ) == self.source.get("columns"):
                shutil.rmtree(other, ignore_errors=True)
        self.folder.mkdir(exist_ok=True)
        described_here = self.folder / "source.json"
        if not described_here.exists():
            self._write_atomic(described_here, json.dumps(self.source).encode())

    def _path(self, group: int) -> Path:
        return self.folder / f"rg-{group:06d}.bin"

    def _write_atomic(self, target: Path, *parts: bytes | memoryview[int]) -> None:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                for part in parts:
                    f.write(part)
            os.replace(tmp, target)  # atomic: readers see no file or the whole file
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def has(self, group: int) -> bool:
        """Whether row group ``group`` has been written (alone or in ``rows.bin``)."""
        return self._path(group).is_file() or self._rows_path().is_file()

    def save(self, group: int, columns: Columns) -> bool:
        """Write row group ``group``; False when it has no flat form or the write failed."""
        if not _spillable(columns):
            return False
        arrays: list[np.ndarray] = []
        index: dict[int, int] = {}  # id(array) -> its number in `arrays`

        def number(array: np.ndarray) -> int:
            if id(array) not in index:
                index[id(array)] = len(arrays)
                arrays.append(np.ascontiguousarray(array))
            return index[id(array)]

        stacks = columns.stacks if isinstance(columns, StackedColumns) else {}
        entries: list[dict[str, Any]] = []
        for name, column in columns.items():
            if name in stacks and isinstance(column, np.ndarray):
                block, offset = stacks[name]
                stack = {"stack": number(block), "offset": offset, "dtype": column.dtype.str}
                entries.append({"name": name, **stack})
            elif isinstance(column, Ragged):
                values, offsets = number(column.values), number(column.offsets)
                entries.append({"name": name, "values": values, "offsets": offsets})
            elif isinstance(column, np.ndarray):
                entries.append({"name": name, "array": number(column)})
        layout: list[dict[str, Any]] = [
            {"dtype": a.dtype.str, "shape": list(a.shape), "offset": 0} for a in arrays
        ]
        header = {"columns": entries, "arrays": layout}
        head = _settle(header, [a.nbytes for a in arrays])
        parts: list[bytes | memoryview[int]] = [_MAGIC, len(head).to_bytes(8, "little"), head]
        written = len(_MAGIC) + 8 + len(head)
        for spec, array in zip(layout, arrays, strict=True):
            parts.append(b"\0" * (spec["offset"] - written))
            parts.append(array.reshape(-1).view(np.uint8).data)
            written = spec["offset"] + array.nbytes
        try:
            self._write_atomic(self._path(group), *parts)
        except OSError:
            return False
        return True

    def load(self, group: int) -> Columns | None:
        """Row group ``group`` mapped from its file, or None when it was not written."""
        return _map(self._path(group))

    def _rows_path(self) -> Path:
        return self.folder / "rows.bin"

    def write_rows(self, groups: int) -> bool:
        """Write ``rows.bin``: row groups ``0 .. groups - 1`` end to end, as one block
        of the whole file (see :meth:`load_rows`): every array of the row groups
        joined, the offsets of list columns moved past the values before them (as
        int64). Only when every row group is written, in one layout. True when the
        file is there.
        """
        target = self._rows_path()
        if target.is_file():
            return True
        headers = [h for g in range(groups) if (h := _read_header(self._path(g))) is not None]
        if not headers or len(headers) != groups:
            return False
        first = headers[0]
        lists = {e["offsets"]: e["values"] for e in first["columns"] if "offsets" in e}
        for header in headers:
            if header["columns"] != first["columns"] or len(header["arrays"]) != len(
                first["arrays"]
            ):
                return False
            for spec, spec0 in zip(header["arrays"], first["arrays"], strict=True):
                if spec["dtype"] != spec0["dtype"] or spec["shape"][1:] != spec0["shape"][1:]:
                    return False
        layout: list[dict[str, Any]] = []
        for k, spec0 in enumerate(first["arrays"]):
            rows = sum(h["arrays"][k]["shape"][0] for h in headers)
            if k in lists:  # offsets: one more than the rows, once
                layout.append({"dtype": "<i8", "shape": [rows - len(headers) + 1]})
            else:
                layout.append({"dtype": spec0["dtype"], "shape": [rows, *spec0["shape"][1:]]})
        whole = {"columns": first["columns"], "arrays": layout}
        head = _settle(whole, [_spec_nbytes(spec) for spec in layout])
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix="rows.bin", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(_MAGIC + len(head).to_bytes(8, "little") + head)
                for k, spec in enumerate(layout):
                    out.write(b"\0" * (spec["offset"] - out.tell()))
                    if k in lists:
                        self._join_offsets(out, headers, k, lists[k])
                        continue
                    for g, header in enumerate(headers):
                        self._copy_array(out, g, header["arrays"][k])
            os.replace(tmp, target)
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        return True

    def _copy_array(self, out: Any, group: int, spec: dict[str, Any]) -> None:
        """Append array ``spec`` of row group ``group``'s file to ``out``."""
        with open(self._path(group), "rb") as part:
            part.seek(spec["offset"])
            left = _spec_nbytes(spec)
            while left:
                chunk = part.read(min(left, _CHUNK))
                if not chunk:
                    raise OSError(f"{self._path(group)} is shorter than its header says")
                out.write(chunk)
                left -= len(chunk)

    def _join_offsets(self, out: Any, headers: list[dict[str, Any]], k: int, values: int) -> None:
        """Append the offsets (array ``k``) of every row group to ``out``, each group's
        moved past the values of the groups before it; ``ValueError`` when a group's
        offsets do not run from 0 to the end of its values."""
        base = 0
        for g, header in enumerate(headers):
            spec = header["arrays"][k]
            count = spec["shape"][0]
            offsets = np.fromfile(
                self._path(g), dtype=spec["dtype"], count=count, offset=spec["offset"]
            )
            length = header["arrays"][values]["shape"][0]
            if len(offsets) != count or offsets[0] != 0 or offsets[-1] != length:
                raise ValueError(f"row group {g}'s offsets do not span its values")
            moved = offsets.astype("<i8") + base
            out.write((moved if g == 0 else moved[1:]).tobytes())
            base += length

    def drop_groups(self, groups: int) -> None:
        """Remove the files of row groups ``0 .. groups - 1`` (``rows.bin`` holds them)."""
        for g in range(groups):
            with contextlib.suppress(OSError):
                self._path(g).unlink()

    def load_rows(self) -> Columns | None:
        """The whole file's rows mapped from ``rows.bin`` (one block, as
        :meth:`load` maps a row group), or None when it was not written."""
        return _map(self._rows_path())


_CHUNK = 16 << 20
"""Bytes copied at a time into ``rows.bin``."""


def _spec_nbytes(spec: dict[str, Any]) -> int:
    """The bytes of the array a header entry describes."""
    count = int(np.prod(spec["shape"], dtype=np.int64))
    return count * int(np.dtype(spec["dtype"]).itemsize)


def _map(path: Path) -> Columns | None:
    """The columns of one file written by :class:`SpillFolder`, mapped; None when
    it is missing or not such a file."""
    try:
        with open(path, "rb") as f:
            header = _header_of(f)
            if header is None:
                return None
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    arrays = []
    for spec in header["arrays"]:
        shape = tuple(spec["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        dtype = np.dtype(spec["dtype"])
        flat = np.frombuffer(mapped, dtype=dtype, count=count, offset=spec["offset"])
        arrays.append(flat.reshape(shape))
    columns = StackedColumns()
    columns.stacks = {}
    for entry in header["columns"]:
        name = entry["name"]
        if "stack" in entry:
            block, offset = arrays[entry["stack"]], entry["offset"]
            columns[name] = stacked_field(block, offset, np.dtype(entry["dtype"]))
            columns.stacks[name] = (block, offset)
        elif "values" in entry:
            columns[name] = Ragged(arrays[entry["values"]], arrays[entry["offsets"]])
        else:
            columns[name] = arrays[entry["array"]]
    return columns.settle()
