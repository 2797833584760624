"""What each table source's decode cache did, named, for ``it.stats().source_caches``.

A table source on the block protocol registers a :class:`CacheLayout` with its
process's decode cache (its name, its blocks, its ``cache_bytes``); every block the
cache decodes for it is counted under that layout on the reading thread. The counts
travel with the other source reads (``SourceReads.caches``: a tuple of
``(layout, blocks decoded, bytes, bytes again)``), summed over threads and processes
by layout (a source pickled to a worker has the same layout there), and end as one
:class:`SourceCache` per source in the stats, which the verdict reads to name the
source whose cache thrashes and the fix that applies to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "CacheCounts",
    "CacheLayout",
    "SourceCache",
    "binary_size",
    "merge_caches",
    "source_caches",
]


class CacheLayout(NamedTuple):
    """A table source as its decode cache's counts name it.

    Attributes:
        name: how the source was built, in words (``"from_parquet('t.parquet')"``).
        unit: what its blocks are (``"row groups"``, ``"runs of lines"``, ...).
        blocks: how many blocks it has.
        cache_bytes: its budget in each process's decode cache.
        decoded_copy: whether it can keep a decoded copy on disk (``cache_dir=``).
    """

    name: str
    unit: str
    blocks: int
    cache_bytes: int
    decoded_copy: bool = False


CacheCounts = tuple[CacheLayout, int, int, int]
"""One source's counts: (layout, blocks decoded, bytes decoded, bytes decoded again)."""


def merge_caches(
    a: tuple[CacheCounts, ...], b: tuple[CacheCounts, ...], sign: int
) -> tuple[CacheCounts, ...]:
    """``a`` plus (``sign=1``) or minus (``sign=-1``) ``b``, source by source; sources
    left with nothing counted are dropped.

    Example:
        >>> one = CacheLayout("from_csv('a.csv')", "runs of lines", 4, 100)
        >>> merge_caches(((one, 3, 30, 10),), ((one, 1, 10, 0),), -1)[0][1:]
        (2, 20, 10)
    """
    if not b:
        return a
    if not a and sign > 0:
        return b
    sums: dict[CacheLayout, list[int]] = {layout: [m, d, r] for layout, m, d, r in a}
    for layout, m, d, r in b:
        counts = sums.setdefault(layout, [0, 0, 0])
        counts[0] += sign * m
        counts[1] += sign * d
        counts[2] += sign * r
    return tuple((layout, m, d, r) for layout, (m, d, r) in sums.items() if m or d or r)


@dataclass(frozen=True)
class SourceCache:
    """One table source's decode cache in ``it.stats().source_caches``.

    Attributes:
        name: how the source was built (``"from_parquet('t.parquet')"``).
        unit: what its blocks are (``"row groups"``, ``"blocks of rows"``, ...).
        blocks: the blocks the source has.
        cache_bytes: its budget in each process's decode cache.
        decoded_copy: whether it can keep a decoded copy on disk (``cache_dir=``).
        blocks_decoded: the blocks its cache decoded, summed over the workers.
        decoded_bytes: the bytes those decodes produced.
        redecoded_bytes: the part of them decoded again after the cache had let the
            same block go.

    Example:
        >>> s = SourceCache("from_parquet('t.parquet')", "row groups", 8, 100,
        ...     True, 16, 800, 400)
        >>> s.block_bytes, s.blocks_held
        (50, 2)
    """

    name: str
    unit: str
    blocks: int
    cache_bytes: int
    decoded_copy: bool
    blocks_decoded: int
    decoded_bytes: int
    redecoded_bytes: int

    @property
    def block_bytes(self) -> int:
        """The mean bytes of one of its blocks, decoded."""
        return self.decoded_bytes // max(1, self.blocks_decoded)

    @property
    def blocks_held(self) -> int:
        """How many of its blocks its ``cache_bytes`` holds (at their mean size)."""
        return min(self.blocks, self.cache_bytes // max(1, self.block_bytes))

    @property
    def thrashes(self) -> bool:
        """Most of what it decoded had been decoded before and let go."""
        return self.blocks_decoded >= 4 and self.redecoded_bytes >= 0.5 * self.decoded_bytes > 0


def binary_size(n: int) -> str:
    """Bytes in the units cache budgets are given in (``256 << 20`` is ``256 MiB``).

    Example:
        >>> binary_size(256 << 20), binary_size(1600)
        ('256 MiB', '1.6 KiB')
    """
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"


def source_caches(caches: tuple[CacheCounts, ...]) -> list[SourceCache]:
    """The counts of ``SourceReads.caches`` as one :class:`SourceCache` per source,
    by name."""
    return sorted(
        (SourceCache(*layout, m, d, r) for layout, m, d, r in caches), key=lambda s: s.name
    )
