"""``TorchStream``: a PyTorch ``IterableDataset`` read the way PyTorch's workers read it.

In a PyTorch worker, ``torch.utils.data.get_worker_info()`` describes the worker
and every worker iterates its own copy of the dataset whole: a dataset that splits
its work with the worker info reads only its part, one that does not is read by
every worker. ``TorchStream`` does the same in the process workers of the drop-in
:class:`~stoker.torch.DataLoader`, whose ``worker_init_fn`` sets the worker info.
Where no worker info is set (a plain :class:`stoker.DataLoader`), each worker keeps
every ``num_workers``-th record, as for any stoker stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import get_worker_info

from .._context import Context
from .._hosts import Shard
from .._iterdataset import IterDataset, StreamCursor
from .._sources.iterable import open_user_stream
from ._stateful import StatefulStreamCursor, next_pass_state

__all__ = ["TorchStream"]


class TorchStream(IterDataset[Any]):
    """A PyTorch ``IterableDataset`` as a stoker stream that shards itself in workers.

    A dataset with ``state_dict()`` / ``load_state_dict()`` (torchdata's ``Stateful``),
    or whose iterator has them, is asked for its state and given it back, in every
    worker, as by torchdata's ``StatefulDataLoader``: the dataset's state, then a new
    iterator, then the iterator's state. Otherwise resuming counts records: a restored
    part reads its dataset copy again and skips the records already handed out, which
    is exact when the dataset yields the same records every time (for the same worker
    info).

    ``fresh_each_pass``: every pass reads a fresh copy of the dataset (PyTorch's
    workers without ``persistent_workers``), so a state saved at the end of a pass
    carries nothing into the next; otherwise the dataset's own state at the end of a
    pass (an epoch it counts) opens the next one.

    Example:
        >>> from torch.utils.data import IterableDataset
        >>> class Numbers(IterableDataset):
        ...     def __iter__(self):
        ...         return iter(range(3))
        >>> list(TorchStream(Numbers()))
        [0, 1, 2]
    """

    def __init__(self, dataset: Any, *, fresh_each_pass: bool = False) -> None:
        self.dataset = dataset
        self.fresh_each_pass = fresh_each_pass

    def __iter__(self) -> Iterator[Any]:
        return iter(self.dataset)

    @property
    def opens_with_state(self) -> bool:
        """True: as torchdata, the state of a pass that has yielded nothing yet holds
        the dataset's and its new iterator's (with the RNG state they may keep)."""
        return True

    def _open(self, ctx: Context, state: dict[str, Any] | None) -> StreamCursor[Any]:
        if _own_copy(ctx.shard):
            return StatefulStreamCursor(self.dataset, state)
        return open_user_stream(self, state, ctx.shard)

    def _next_pass_state(self, end: dict[str, Any] | None, shard: Shard) -> dict[str, Any] | None:
        # A part read by counting (no worker info) has no dataset state to carry.
        return None if self.fresh_each_pass else next_pass_state(end)

    def __repr__(self) -> str:
        return f"TorchStream({type(self.dataset).__name__})"


def _own_copy(shard: Shard | None) -> bool:
    """This reader iterates the dataset as PyTorch would: alone, or in a worker of the
    drop-in (whose worker info lets the dataset split its work itself)."""
    return shard is None or shard.count == 1 or get_worker_info() is not None
