"""The one decode cache of a process: decoded blocks of every table source, in one budget.

A shuffled epoch asks for rows all over a file. Decoding the whole block behind each
row (a Parquet row group, an SQLite range of rowids, a run of JSON lines), for every
batch, would decode every block about once per batch; the cache keeps the most
recently used decoded blocks instead, so each one is decoded about once per pass
while the blocks in use fit. Pair it with a source's ``shuffle_sampler`` (blocks in a
random order, rows shuffled within a window) when they do not.

There is one cache per process, shared by every table source in it (and by the
threads that read them): its budget is the largest ``cache_bytes`` of the sources
reading through it (default 256 MiB), and each source's own blocks stay within its
``cache_bytes``. A process worker starts with an empty cache of its own.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from typing import Any

from .._source_caches import CacheLayout
from .._stats import count_read

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DecodeCache",
    "count_decode",
    "count_hits",
    "process_cache",
]

DEFAULT_CACHE_BYTES = 256 << 20
"""Default budget of a source's decoded blocks in its process: 256 MiB."""


class DecodeCache:
    """A thread-safe least-recently-used cache of decoded blocks, bounded in bytes.

    Keys are ``(owner, block)``: an owner (one table source) holds at most the bytes
    it was registered with (:meth:`register`), and all of them together at most the
    largest of those (the process's budget). Threads that ask for the same missing
    block at once wait for one decode instead of each decoding it. A block larger than
    its owner's budget is decoded and handed out but not kept. Every hit and decode
    is counted for the loader's stats (``it.stats().cache_hits``, ``decoded_bytes``; a
    block decoded again after it was let go counts in ``redecoded_bytes``).

    Example:
        >>> cache = DecodeCache()
        >>> cache.register("t", 100)
        >>> cache.get(("t", 0), lambda: b"x" * 60, len)[:3]
        b'xxx'
        >>> cache.get(("t", 1), lambda: b"y" * 60, len)[:3], cache.held_keys()
        (b'yyy', [('t', 1)])

    Resources:
        No thread of its own: whichever thread asks for a missing block decodes it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks: OrderedDict[tuple[Hashable, Hashable], tuple[Any, int]] = OrderedDict()
        self._pending: dict[tuple[Hashable, Hashable], Future[Any]] = {}
        self._budgets: dict[Hashable, int] = {}  # owner -> its budget
        self._layouts: dict[Hashable, CacheLayout] = {}  # owner -> what the stats call it
        self._held: dict[Hashable, int] = {}  # owner -> bytes it holds
        self._seen: set[tuple[Hashable, Hashable]] = set()  # keys decoded once
        self._bytes = 0

    @property
    def budget(self) -> int:
        """The bytes all owners' blocks may take together: the largest owner budget."""
        with self._lock:
            return max(self._budgets.values(), default=DEFAULT_CACHE_BYTES)

    def register(self, owner: Hashable, budget: int, layout: CacheLayout | None = None) -> None:
        """Let ``owner`` keep up to ``budget`` bytes of blocks (idempotent); its decodes
        are counted under ``layout`` too, when given (``it.stats().source_caches``)."""
        with self._lock:
            self._budgets[owner] = budget
            if layout is not None:
                self._layouts[owner] = layout

    def release(self, owner: Hashable) -> None:
        """Drop ``owner``'s blocks and budget (a source that is gone)."""
        with self._lock:
            for key in [k for k in self._blocks if k[0] == owner]:
                self._bytes -= self._blocks.pop(key)[1]
            self._seen = {k for k in self._seen if k[0] != owner}
            self._budgets.pop(owner, None)
            self._layouts.pop(owner, None)
            self._held.pop(owner, None)

    def held_keys(self) -> list[tuple[Hashable, Hashable]]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._blocks)

    def held_bytes(self, owner: Hashable) -> int:
        """The bytes of ``owner``'s blocks held now."""
        with self._lock:
            return self._held.get(owner, 0)

    def bytes_of(self, owner: Hashable, blocks: Sequence[Hashable]) -> int | None:
        """The bytes the blocks ``blocks`` of ``owner`` were counted as when kept, all
        together; None when one is not held."""
        total = 0
        with self._lock:
            for block in blocks:
                entry = self._blocks.get((owner, block))
                if entry is None:
                    return None
                total += entry[1]
        return total

    def peek(self, owner: Hashable, blocks: Sequence[Hashable]) -> list[Any] | None:
        """The blocks ``blocks`` of ``owner`` when every one is held (counted as hits),
        else None (nothing decoded, nothing counted; it stops at the first missing)."""
        found: list[Any] = []
        with self._lock:
            held = self._blocks
            for block in blocks:
                entry = held.get((owner, block))
                if entry is None:
                    return None
                found.append(entry[0])
            for block in blocks:
                held.move_to_end((owner, block))
        count_read(hits=len(blocks))
        return found

    def get(
        self,
        key: tuple[Hashable, Hashable],
        decode: Callable[[], Any],
        size: Callable[[Any], int],
    ) -> Any:
        """The block for ``key``: from the cache, or ``decode()`` (then kept if it fits).

        A thread that waited for another's decode of the same block gets that block,
        or, when that decode failed (its error reaches the thread that decoded),
        decodes it itself."""
        while True:
            with self._lock:
                held = self._blocks.get(key)
                if held is not None:
                    self._blocks.move_to_end(key)
                    count_read(hits=1)
                    return held[0]
                pending = self._pending.get(key)
                if pending is None:
                    pending = self._pending[key] = Future()
                    break
            if pending.exception() is not None:  # the decoder's error is its own: again
                continue
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
            again = key in self._seen
            self._seen.add(key)
            self._keep(key, block, nbytes)
            layout = self._layouts.get(key[0])
        count_read(decoded_bytes=nbytes, again=again, source=layout)
        pending.set_result(block)
        return block

    def _keep(self, key: tuple[Hashable, Hashable], block: Any, nbytes: int) -> None:
        """Keep ``block`` if it fits its owner's budget, letting go of the least
        recently used blocks of its owner, then of anyone, to make room (under the lock)."""
        who = key[0]
        mine = self._budgets.get(who, DEFAULT_CACHE_BYTES)
        if nbytes > mine:
            return
        if self._held.get(who, 0) + nbytes > mine:
            for other in [k for k in self._blocks if k[0] == who]:
                self._drop(other)
                if self._held.get(who, 0) + nbytes <= mine:
                    break
        total = max(self._budgets.values(), default=DEFAULT_CACHE_BYTES)
        while self._blocks and self._bytes + nbytes > total:
            self._drop(next(iter(self._blocks)))
        self._blocks[key] = (block, nbytes)
        self._bytes += nbytes
        self._held[who] = self._held.get(who, 0) + nbytes

    def _drop(self, key: tuple[Hashable, Hashable]) -> None:
        _, freed = self._blocks.pop(key)
        self._bytes -= freed
        self._held[key[0]] -= freed

    def clear(self) -> None:
        """Drop every block (the budgets stay)."""
        with self._lock:
            self._blocks.clear()
            self._held.clear()
            self._bytes = 0


_cache = DecodeCache()


def process_cache() -> DecodeCache:
    """This process's decode cache (a forked child starts with an empty one)."""
    return _cache


def _forget_after_fork() -> None:
    global _cache  # a forked child must not share the parent's lock
    _cache = DecodeCache()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def count_decode(nbytes: int, again: bool) -> None:
    """Count one block of ``nbytes`` decoded (``again``: it had been decoded and let go
    before) for the loader's stats (see :func:`stoker._stats.count_read`)."""
    count_read(decoded_bytes=nbytes, again=again)


def count_hits(blocks: int) -> None:
    """Count ``blocks`` served already decoded (from memory or a decoded copy)."""
    count_read(hits=blocks)
