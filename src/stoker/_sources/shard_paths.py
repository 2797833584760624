"""Shard lists: brace ranges, globs and fsspec URLs, resolved once when a source is built.

A path with a protocol (``s3://``, ``gs://``, ``http://``, ``memory://``, ...) is
listed and opened with fsspec through a :class:`~stoker._sources.remote.Remote`
(``pip install 'stoker[remote]'``): listed once, when the source is built, and read
by ranged requests with retries; any other path with the standard library. Local
matches are sorted and must be files; a local match that is a symlink must stay
inside the pattern's non-glob folder.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from typing import IO

from ..errors import ConfigError
from .remote import Remote, is_url

__all__ = ["SHARD_BLOCK", "expand_braces", "is_url", "list_shards", "open_shard"]

_BRACE = re.compile(r"\{(\d+)\.\.(\d+)\}")
_GLOB = re.compile(r"[*?\[]")

SHARD_BLOCK = 4 << 20
"""Bytes asked for at a time when a remote shard is read (one ranged request each)."""


def expand_braces(pattern: str) -> list[str]:
    """Expand WebDataset-style ranges: ``"s-{08..10}.tar"`` -> s-08, s-09, s-10.

    The width of the first bound sets the zero padding.

    Example:
        >>> expand_braces("s-{08..10}.tar")
        ['s-08.tar', 's-09.tar', 's-10.tar']

    Errors:
        ConfigError: a range whose end is below its start.
    """
    match = _BRACE.search(pattern)
    if match is None:
        return [pattern]
    lo, hi = int(match.group(1)), int(match.group(2))
    if hi < lo:
        raise ConfigError(f"the range {match.group(0)} in {pattern!r} ends before it starts")
    width = len(match.group(1))
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [p for i in range(lo, hi + 1) for p in expand_braces(f"{head}{i:0{width}d}{tail}")]


def _local(pattern: str) -> list[str]:
    path = pattern.removeprefix("file://")
    if not _GLOB.search(path):
        if not os.path.isfile(path):
            raise ConfigError(f"the shard {path!r} does not exist or is not a file")
        return [path]
    root = os.path.realpath(path[: _GLOB.search(path).start()].rpartition(os.sep)[0] or ".")  # type: ignore[union-attr]
    found = []
    for match in sorted(glob.glob(path, recursive=True)):
        if not os.path.isfile(match):
            continue
        real = os.path.realpath(match)
        if os.path.islink(match) and os.path.commonpath([root, real]) != root:
            raise ConfigError(
                f"the shard {match!r} is a link to {real!r}, outside {root!r}: stoker does "
                "not follow links out of a source's folder (copy the shard, or list it "
                "explicitly)"
            )
        found.append(match)
    return found


def _remote(pattern: str, remote: Remote) -> list[str]:
    if not _GLOB.search(pattern.partition("://")[2]):
        return [pattern]
    fs = remote.fs
    return sorted(fs.unstrip_protocol(p) for p in fs.glob(fs._strip_protocol(pattern)))


def list_shards(
    pattern_or_paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    remote: Remote | None = None,
) -> list[str]:
    """The shards named by a pattern or a list, in a fixed order.

    A pattern is sorted after expanding; a list keeps its order. URLs are listed
    through ``remote`` (a default one for their protocol when None).

    Errors:
        ConfigError: nothing matches, a local file is missing, a link leaves the folder.
        MissingExtra: a URL without fsspec.
    """
    if isinstance(pattern_or_paths, str | os.PathLike):
        patterns, keep_order = [os.fspath(pattern_or_paths)], False
    elif isinstance(pattern_or_paths, Sequence):
        patterns, keep_order = [os.fspath(p) for p in pattern_or_paths], True
    else:
        raise ConfigError(
            "pass shards as a glob or brace pattern, or as a list of paths, got "
            f"{type(pattern_or_paths).__name__}"
        )
    shards: list[str] = []
    for pattern in patterns:
        for expanded in expand_braces(pattern):
            if is_url(expanded):
                remote = remote if remote is not None else Remote(expanded, {})
                shards.extend(_remote(expanded, remote))
            else:
                shards.extend(_local(expanded))
    if not keep_order:
        shards.sort()
    if not shards:
        raise ConfigError(
            f"no shards match {pattern_or_paths!r}: check the path and the pattern (an "
            "empty shard list is almost always a mistake)"
        )
    if len(set(shards)) != len(shards):
        raise ConfigError("the shard list names a shard twice: each shard must appear once")
    return shards


def open_shard(url: str, remote: Remote | None = None) -> IO[bytes]:
    """Open a shard for reading (a URL through ``remote``: ranged reads with retries).

    Errors:
        FileNotFoundError: the shard is gone (deleted after listing).
        RemoteReadError: a read of a URL whose retry budget ran out.
    """
    if is_url(url):
        remote = remote if remote is not None else Remote(url, {})
        return remote.open_file(url, SHARD_BLOCK)
    return open(url.removeprefix("file://"), "rb")
