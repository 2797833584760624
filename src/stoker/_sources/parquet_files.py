"""Which Parquet files a ``from_parquet`` path, glob or directory names.

A directory stands for every data file below it; the markers that Spark and pyarrow
write beside the data (``_SUCCESS``, ``_metadata``, ``.crc`` files) are left out.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .listing import is_glob
from .remote import Remote, is_url

__all__ = ["parquet_paths"]

PathLike = str | os.PathLike[str]


def _data_file(path: Path) -> bool:
    # Spark and pyarrow write markers (_SUCCESS, _metadata, .crc) beside the data.
    return path.is_file() and not _marker(path.name)


def _marker(name: str) -> bool:
    return name.startswith(("_", ".")) or name.endswith(".crc")


def parquet_paths(
    paths: PathLike | Sequence[PathLike], storage_options: dict[str, Any] | None = None
) -> list[str]:
    """The Parquet files that ``paths`` names, in sorted order.

    ``paths`` is a path, a glob, or a list of them; a directory stands for every data
    file below it (recursively, leaving out ``_``- and ``.``-prefixed marker files).
    fsspec URLs (``s3://``, ``http://``, ``memory://``, ...) are listed through fsspec
    (all of one file system), opened with ``storage_options``.

    Errors:
        ConfigError: no paths, a path that does not exist, a glob or directory that
            matches no file.
    """
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    if not items:
        raise ConfigError("from_parquet() needs at least one path, glob or directory")
    texts = [os.fspath(item) for item in items]
    if any(is_url(t) for t in texts):
        remote = Remote(texts[0] if is_url(texts[0]) else texts[-1], storage_options or {})
        return [u for u in remote.list_files(texts) if not _marker(u.rsplit("/", 1)[-1])]
    found: list[str] = []
    for item in items:
        text = os.fspath(item)
        if is_glob(text):
            matches = sorted(glob.glob(text, recursive=True))
            files = [m for m in matches if _data_file(Path(m))]
            dirs = [m for m in matches if Path(m).is_dir()]
            for d in dirs:
                files.extend(str(p) for p in sorted(Path(d).rglob("*")) if _data_file(p))
            if not files:
                raise ConfigError(f"the pattern {text!r} matches no file (check the path)")
            found.extend(sorted(files))
        elif Path(text).is_dir():
            files = [str(p) for p in sorted(Path(text).rglob("*")) if _data_file(p)]
            if not files:
                raise ConfigError(f"the directory {text!r} holds no data file")
            found.extend(files)
        elif Path(text).is_file():
            found.append(text)
        else:
            raise ConfigError(f"no such file or directory: {text!r}")
    return found
