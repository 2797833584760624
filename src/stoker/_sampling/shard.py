"""``Shard``: which part of the data one host (or one worker) reads."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["Shard"]


@dataclass(frozen=True, slots=True)
class Shard:
    """Part ``index`` of ``count`` equal parts.

    Example:
        >>> Shard(1, 4)
        Shard(index=1, count=4)

    Errors:
        ConfigError: ``count < 1`` or ``index`` outside ``[0, count)``.
    """

    index: int
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 1:
            raise ConfigError(f"Shard count must be an int >= 1, got {self.count!r}")
        if not isinstance(self.index, int) or isinstance(self.index, bool):
            raise ConfigError(f"Shard index must be an int, got {self.index!r}")
        if not 0 <= self.index < self.count:
            raise ConfigError(
                f"Shard index must be in [0, {self.count}), got {self.index}: "
                "use Shard(index, count) with 0 <= index < count"
            )
