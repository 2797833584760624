"""The record index of a line-based file (JSONL, CSV): where every record starts and ends.

The index is built once, vectorised (the file is read in 16 MiB blocks and the
newlines found with NumPy), and cached as a ``.npy`` file:

* beside the data file, as ``.<name>.stoker-index.npy``, when its directory is
  writable;
* else in ``$XDG_CACHE_HOME/stoker/index/`` (default ``~/.cache/stoker/index/``),
  named by a hash of the file's absolute path.

The cached index records the file's size and modification time (ns); when either
changed, the index is stale and is built again. Blank lines are not records.

With ``quote`` (CSV), a newline inside a quoted field does not end a record: a
newline ends one only where the count of quote characters before it is even, which
holds for CSV's standard quoting (a quote inside a field is doubled).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["cache_path", "record_spans"]

_BLOCK = 16 << 20
_MAGIC = 0x5354_4B49_4458  # "STKIDX"
_VERSION = 1


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stoker" / "index"


def cache_path(path: str, quote: bytes | None = None) -> tuple[Path, Path]:
    """Where the index of ``path`` is kept: ``(beside the file, in the cache directory)``.

    Example:
        >>> cache_path("/data/train.jsonl")[0].name
        '.train.jsonl.stoker-index.npy'
    """
    full = os.path.abspath(path)
    tag = "" if quote is None else f".q{quote[0]:02x}"
    beside = Path(full).with_name(f".{Path(full).name}{tag}.stoker-index.npy")
    digest = hashlib.sha256(full.encode()).hexdigest()[:32]
    return beside, _cache_dir() / f"{digest}{tag}.npy"


def _scan(path: str, quote: bytes | None) -> np.ndarray:
    """``(2, n)`` int64: start and stop (before the line end) of every non-blank record."""
    ends: list[np.ndarray] = []
    crs: list[np.ndarray] = []
    position = 0
    parity = 0
    before = 0  # the byte before the block
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            data = np.frombuffer(block, dtype=np.uint8)
            newlines = np.flatnonzero(data == 10)
            if quote is not None:
                quotes = np.cumsum(data == quote[0], dtype=np.int64)
                inside = (quotes[newlines] + parity) % 2 == 1
                parity = int((quotes[-1] + parity) % 2)
                newlines = newlines[~inside]
            previous = np.where(newlines > 0, data[np.maximum(newlines - 1, 0)], before)
            ends.append(newlines + position)
            crs.append(previous == 13)
            position += len(block)
            before = int(data[-1])
    stops = np.concatenate([*ends, np.array([position], dtype=np.int64)]).astype(np.int64)
    starts = np.concatenate([[0], stops[:-1] + 1]).astype(np.int64)
    stops = stops - np.concatenate([*crs, [False]])  # "\r\n" ends before the "\r"
    keep = stops > starts  # blank lines are not records
    return np.stack([starts[keep], stops[keep]])


def _load(cached: Path, size: int, mtime: int) -> np.ndarray | None:
    try:
        stored: np.ndarray = np.load(cached, allow_pickle=False)
    except (OSError, ValueError):
        return None
    header = stored[:5].tolist() if stored.ndim == 1 and len(stored) >= 5 else []
    if header[:4] != [_MAGIC, _VERSION, size, mtime] or len(stored) != 5 + 2 * header[4]:
        return None
    spans: np.ndarray = stored[5:].reshape(2, header[4])
    return spans


def _save(target: Path, spans: np.ndarray, size: int, mtime: int) -> bool:
    header = np.array([_MAGIC, _VERSION, size, mtime, spans.shape[1]], dtype=np.int64)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, np.concatenate([header, spans.ravel()]), allow_pickle=False)
        os.replace(tmp, target)  # atomic: readers see the old index or the new one
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False


def record_spans(path: str, quote: bytes | None = None) -> tuple[np.ndarray, Path | None]:
    """The ``(2, n)`` start/stop byte offsets of the records of ``path``, and the cache
    file they were read from or written to (None when none could be written).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
        >>> with open(path, "w") as f:
        ...     _ = f.write('{"a": 1}\\n\\n{"a": 22}\\n')
        >>> spans, cached = record_spans(path)
        >>> spans.tolist(), cached.name
        ([[0, 10], [8, 19]], '.a.jsonl.stoker-index.npy')
    """
    stat = os.stat(path)
    size, mtime = stat.st_size, stat.st_mtime_ns
    beside, elsewhere = cache_path(path, quote)
    for cached in (beside, elsewhere):
        spans = _load(cached, size, mtime)
        if spans is not None:
            return spans, cached
    spans = _scan(path, quote)
    for cached in (beside, elsewhere):
        if _save(cached, spans, size, mtime):
            return spans, cached
    return spans, None
