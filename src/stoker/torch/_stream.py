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
from .._dataset import IterDataset, StreamCursor
from .._sampling.shard import Shard
from .._sources.iterable import open_user_stream

__all__ = ["TorchStream"]


class TorchStream(IterDataset[Any]):
    """A PyTorch ``IterableDataset`` as a stoker stream that shards itself in workers.

    Resuming counts records: a restored part reads its dataset copy again and skips
    the records already handed out, which is exact when the dataset yields the same
    records every time (for the same worker info).

    Example:
        >>> from torch.utils.data import IterableDataset
        >>> class Numbers(IterableDataset):
        ...     def __iter__(self):
        ...         return iter(range(3))
        >>> list(TorchStream(Numbers()))
        [0, 1, 2]
    """

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __iter__(self) -> Iterator[Any]:
        return iter(self.dataset)

    def _open(self, ctx: Context, state: dict[str, Any] | None) -> StreamCursor[Any]:
        shard: Shard | None = ctx.shard
        if get_worker_info() is not None:
            shard = None  # this worker's copy reads its own part, as under PyTorch
        return open_user_stream(self, state, shard)

    def __repr__(self) -> str:
        return f"TorchStream({type(self.dataset).__name__})"
