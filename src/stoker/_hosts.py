"""``Shard`` (which part of the data one host or worker reads), and which host this is.

``shard=`` is resolved here to an :class:`~stoker.Shard`.

``shard=sk.Shard(index, count)`` names the host directly; ``"jax"`` asks
``jax.process_index()`` / ``jax.process_count()`` and ``"torch"`` asks
``torch.distributed.get_rank()`` / ``get_world_size()``. stoker runs no cluster of
its own: the framework's runtime must already be up (``jax.distributed.initialize``
or ``torch.distributed.init_process_group``) when the loader is built.

Each host then reads only its slice of every global batch (see ``_epoch/plan.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._torch_types import is_torch_data
from .errors import ConfigError

__all__ = ["ONE_HOST", "Shard", "host_slice", "resolve_hosts"]


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


ONE_HOST = Shard(0, 1)


def _from_jax() -> Shard:
    try:
        import jax
    except ImportError as exc:
        raise ConfigError(
            "shard='jax' needs JAX: pip install 'stoker[jax]', or pass sk.Shard(index, count)"
        ) from exc
    return Shard(int(jax.process_index()), int(jax.process_count()))


def _from_torch() -> Shard:
    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise ConfigError(
            "shard='torch' needs PyTorch: pip install 'stoker[torch]', or pass "
            "sk.Shard(index, count)"
        ) from exc
    if not dist.is_available() or not dist.is_initialized():
        raise ConfigError(
            "shard='torch' reads the rank and world size from torch.distributed, which is "
            "not initialised: call torch.distributed.init_process_group(...) before building "
            "the loader, or pass sk.Shard(rank, world_size)"
        )
    return Shard(int(dist.get_rank()), int(dist.get_world_size()))


def resolve_hosts(shard: Shard | str | None) -> Shard:
    """The host's :class:`Shard` for a loader's ``shard=`` argument.

    Example:
        >>> resolve_hosts(None), resolve_hosts(Shard(1, 2))
        (Shard(index=0, count=1), Shard(index=1, count=2))

    Errors:
        ConfigError: ``"jax"`` / ``"torch"`` without that framework, or before its
            distributed runtime is initialised (torch).
    """
    if shard is None:
        return ONE_HOST
    if isinstance(shard, Shard):
        return shard
    if shard == "jax":
        return _from_jax()
    if shard == "torch":
        return _from_torch()
    raise ConfigError(
        f"shard must be sk.Shard(index, count), 'jax', 'torch' or None, got {shard!r}"
    )


def host_slice(count: int, host: Shard) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of a global batch of ``count`` records that ``host`` loads.

    Every host gets ``count // host.count`` consecutive rows, in host order; the
    ``count % host.count`` records at the end are left out.

    Example:
        >>> host_slice(10, Shard(1, 3))
        (3, 6)
    """
    per = count // host.count
    return host.index * per, (host.index + 1) * per


def is_distributed_sampler(sampler: Any) -> bool:
    """True for PyTorch's ``DistributedSampler`` (without importing torch)."""
    return is_torch_data(sampler, "DistributedSampler")
