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
from ._stateful import StatefulStreamCursor, is_stateful

__all__ = ["TorchStream"]


class TorchStream(IterDataset[Any]):
    """A PyTorch ``IterableDataset`` as a stoker stream that shards itself in workers.

    A dataset with ``state_dict()`` / ``load_state_dict()`` (torchdata's ``Stateful``),
    or whose iterator has them, is asked for its state and given it back, in every
    worker. Otherwise resuming counts records: a restored part reads its dataset copy
    again and skips the records already handed out, which is exact when the dataset
    yields the same records every time (for the same worker info).

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
        if (shard is None or shard.count == 1) and _stateful_stream(self.dataset):
            return StatefulStreamCursor(self.dataset, state)
        return open_user_stream(self, state, shard)

    def __repr__(self) -> str:
        return f"TorchStream({type(self.dataset).__name__})"


def _stateful_stream(dataset: Any) -> bool:
    """The dataset follows the stateful protocol (its iterator's state is then kept too).

    A dataset that is not stateful itself is resumed by counting, whatever its
    iterator: the iterator is only known once created.
    """
    return is_stateful(dataset)
