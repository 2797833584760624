"""``Context``: what a pipeline stage may depend on besides the index."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._hosts import Shard

_WHOLE = Shard(0, 1)

__all__ = ["DEFAULT_CONTEXT", "SKIP", "Context", "Skip"]


class Skip(enum.Enum):
    """Marks a record that a ``filter`` removed (a singleton that survives pickling)."""

    SKIP = "skip"


SKIP = Skip.SKIP


@dataclass(frozen=True, slots=True)
class Context:
    """The (seed, epoch) a record is read in, and where in the pipeline tree a stage sits.

    ``path`` grows by one entry per stage on the way from the loader down to the
    sources (the entry is the parent's position among its siblings), so every stage
    has a distinct path and two random stages never share a stream. ``shard`` is the
    part of a stream that this reader owns.
    """

    seed: int = 0
    epoch: int = 0
    path: tuple[int, ...] = ()
    shard: Shard = _WHOLE

    def child(self, position: int = 0) -> Context:
        """The context a stage hands to its parent number ``position``."""
        return Context(self.seed, self.epoch, (*self.path, position), self.shard)


DEFAULT_CONTEXT = Context()
