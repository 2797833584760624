"""``worker_mode="auto"``: threads when the whole pipeline releases the GIL.

Threads run a pipeline in parallel only where its work releases the GIL: NumPy
copies, file and socket reads, image decoders, ``time.sleep``. ``auto`` picks thread
workers when the dataset says so (its ``releases_gil`` property, which every node
answers for itself and its parents) and the ``collate_fn`` is marked with
:func:`~stoker.releases_gil` (stoker's ``default_collate`` and ``pad_collate`` are),
and processes otherwise:

* stoker's sources and index stages (``range``, ``from_arrays``, ``from_sequence``,
  the table sources, ``shuffle``, ``shard``, ``concat``, ``zip``, ``mix``) release it;
* a ``map``/``filter`` function or a ``from_iterable`` factory does when it is marked
  with :func:`~stoker.releases_gil`;
* anything else (a user's own ``Dataset`` subclass that does not override
  ``releases_gil``, a PyTorch dataset) does not.
"""

from __future__ import annotations

from typing import Any

from .._collate import default_collate
from .._dataset import Dataset
from .._iterdataset import IterDataset
from .._typing import is_marked, releases_gil

__all__ = ["pipeline_releases_gil", "releases_gil"]


def pipeline_releases_gil(node: Dataset[Any] | IterDataset[Any], collate_fn: object = None) -> bool:
    """True when ``node`` (with its parents) and ``collate_fn`` release the GIL.

    ``collate_fn`` None stands for the loader's default collate.

    Example:
        >>> import stoker as sk
        >>> pipeline_releases_gil(sk.range(10).shuffle(0))
        True
        >>> pipeline_releases_gil(sk.range(10).map(lambda x: x + 1))
        False
    """
    collate = default_collate if collate_fn is None else collate_fn
    return is_marked(collate) and node.releases_gil
