"""Batches shaped as PyTorch's ``default_collate`` and ``default_convert`` shape them.

stoker collates into NumPy arrays (planned, recycled buffers, shared memory with
process workers); the drop-in :class:`~stoker.torch.DataLoader` then gives them the
form a PyTorch user expects, without copying an array:

* every numeric array becomes a tensor sharing its memory;
* a tuple record gives a *list* of columns (``default_collate`` does so), a
  namedtuple stays a namedtuple;
* a column of strings or other objects is a list, except inside a sequence (a
  tuple, list or namedtuple record), where PyTorch leaves it a tuple.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .._tree import is_dataclass_instance, is_namedtuple
from ._tensors import map_leaves, tensor_of

__all__ = ["torch_collated", "torch_converted"]


def _is_column(value: list[Any]) -> bool:
    """A list of per-record values (strings, objects) rather than a list record."""
    if not value:
        return True
    first = value[0]
    if isinstance(first, np.ndarray | torch.Tensor | Mapping | tuple | list):
        return False
    return not (is_dataclass_instance(first))


def torch_collated(batch: Any, in_sequence: bool = False) -> Any:
    """A batch from stoker's ``default_collate`` as PyTorch's ``default_collate`` has it.

    Example:
        >>> import numpy as np
        >>> torch_collated((np.array([1, 2]), ["a", "b"]))
        [tensor([1, 2]), ('a', 'b')]
    """
    if isinstance(batch, np.ndarray):
        return tensor_of(batch)
    if isinstance(batch, Mapping):
        return {k: torch_collated(v) for k, v in batch.items()}
    if is_namedtuple(batch):
        return type(batch)(*(torch_collated(v, True) for v in batch))
    if isinstance(batch, tuple):
        return [torch_collated(v, True) for v in batch]
    if isinstance(batch, list):
        if _is_column(batch):
            return tuple(batch) if in_sequence else batch
        return [torch_collated(v, True) for v in batch]
    if is_dataclass_instance(batch):
        return map_leaves(batch, lambda leaf: torch_collated(leaf))
    return batch


def torch_converted(record: Any) -> Any:
    """A record (``batch_size=None``) as PyTorch's ``default_convert`` returns it.

    Arrays and NumPy scalars become tensors, tuples become lists; Python numbers,
    strings and other objects stay as they are.

    Example:
        >>> import numpy as np
        >>> torch_converted((np.float32(1.5), 2, "a"))
        [tensor(1.5000), 2, 'a']
    """
    if isinstance(record, np.ndarray):
        return tensor_of(record)
    if isinstance(record, np.generic) and record.dtype.kind in "biufc":
        return tensor_of(np.asarray(record))
    if isinstance(record, Mapping):
        return {k: torch_converted(v) for k, v in record.items()}
    if is_namedtuple(record):
        return type(record)(*(torch_converted(v) for v in record))
    if isinstance(record, tuple | list):
        return [torch_converted(v) for v in record]
    return record
