"""``DecodeCache``: decoded blocks (row groups, fragments) kept within a memory budget.

A shuffled epoch asks for rows all over a file. Decoding the whole row group behind
each row, for every batch, would decode every row group about once per batch; the
cache keeps the most recently used decoded blocks instead, up to ``budget`` bytes,
so each one is decoded about once per pass while the blocks in use fit. Pair it with
a :class:`~stoker.ChunkedShuffleSampler` aligned to the blocks when they do not.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any

from .._stats import count_read

__all__ = ["DEFAULT_CACHE_BYTES", "DecodeCache", "count_decode", "count_hits"]

DEFAULT_CACHE_BYTES = 256 << 20
"""Default budget per worker (and per dataset in the main process): 256 MiB."""


class DecodeCache:
    """A thread-safe least-recently-used cache of decoded blocks, bounded in bytes.

    Threads that ask for the same missing block at once wait for one decode instead of
    each decoding it. A block larger than the whole budget is decoded and handed out
    but not kept. Every hit and decode is counted for the loader's stats
    (``it.stats().cache_hits``, ``decoded_bytes``; a block decoded again after it was
    let go counts in ``redecoded_bytes``).

    Example:
        >>> cache = DecodeCache(budget=100)
        >>> cache.get("a", lambda: b"x" * 60, len)[:3]
        b'xxx'
        >>> cache.get("b", lambda: b"y" * 60, len)[:3], cache.keys()
        (b'yyy', ['b'])
    """

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._blocks: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._pending: dict[Hashable, Future[Any]] = {}
        self._bytes = 0
        self._seen: set[Hashable] = set()  # keys decoded once (blocks are few)
        self.decodes = 0

    def keys(self) -> list[Hashable]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._blocks)

    def get(self, key: Hashable, decode: Callable[[], Any], size: Callable[[Any], int]) -> Any:
        """The block for ``key``: from the cache, or ``decode()`` (then kept if it fits)."""
        with self._lock:
            held = self._blocks.get(key)
            if held is not None:
                self._blocks.move_to_end(key)
                count_read(hits=1)
                return held[0]
            pending = self._pending.get(key)
            owner = pending is None
            if owner:
                pending = self._pending[key] = Future()
        if pending is None:  # for mypy: set in both branches above
            raise RuntimeError("unreachable")
        if not owner:
            count_read(hits=1)
            return pending.result()
        try:
            block = decode()
        except BaseException as exc:
            with self._lock:
                del self._pending[key]
            pending.set_exception(exc)
            raise
        nbytes = size(block)
        with self._lock:
            del self._pending[key]
            self.decodes += 1
            again = key in self._seen
            self._seen.add(key)
        count_decode(nbytes, again)
        with self._lock:
            if nbytes <= self._budget:
                while self._blocks and self._bytes + nbytes > self._budget:
                    _, (_, freed) = self._blocks.popitem(last=False)
                    self._bytes -= freed
                self._blocks[key] = (block, nbytes)
                self._bytes += nbytes
        pending.set_result(block)
        return block

    def clear(self) -> None:
        """Drop every block."""
        with self._lock:
            self._blocks.clear()
            self._bytes = 0


def count_decode(nbytes: int, again: bool) -> None:
    """Count one block of ``nbytes`` decoded (``again``: it had been decoded and let go
    before) for the loader's stats (see :func:`stoker._stats.count_read`)."""
    count_read(decoded_bytes=nbytes, again=again)


def count_hits(blocks: int) -> None:
    """Count ``blocks`` served already decoded (from memory or a decoded copy)."""
    count_read(hits=blocks)
