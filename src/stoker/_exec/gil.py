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

Processes isolate the training process from user code: :func:`pipeline_shares_process`
says whether ``auto`` may still run the pipeline on threads or on the caller's thread
while they start, or when handing batches over costs more than building them (every
function marked with :func:`~stoker.shares_process` or :func:`~stoker.releases_gil`,
every node's ``shares_process`` true). Otherwise, with workers, only processes run it:
a native crash is a ``WorkerCrashed`` naming the record, not the end of the trainer.
"""

from __future__ import annotations

from typing import Any

from .._collate import default_collate
from .._config import LoaderConfig
from .._dataset import Dataset
from .._iterdataset import IterDataset
from .._typing import is_marked, may_share, releases_gil

__all__ = ["isolated", "pipeline_releases_gil", "pipeline_shares_process", "releases_gil"]


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


def pipeline_shares_process(
    node: Dataset[Any] | IterDataset[Any], collate_fn: object = None
) -> bool:
    """True when ``node`` (with its parents) and ``collate_fn`` may run in the training
    process: stoker's own stages, or user code marked with :func:`~stoker.shares_process`
    or :func:`~stoker.releases_gil`.

    Example:
        >>> import stoker as sk
        >>> pipeline_shares_process(sk.range(10).map(sk.shares_process(abs)))
        True
        >>> pipeline_shares_process(sk.range(10).map(abs))
        False
        >>> pipeline_shares_process(sk.range(10), collate_fn=list)
        False
    """
    collate = default_collate if collate_fn is None else collate_fn
    return may_share(collate) and node.shares_process


def isolated(cfg: LoaderConfig, mode: str, node: Dataset[Any] | IterDataset[Any]) -> bool:
    """True when ``worker_mode="auto"`` resolved to ``mode="process"`` for a pipeline
    that may not share the training process: its user code then runs in the worker
    processes only, from the first batch on (never on threads, never inline).

    Example:
        >>> import stoker as sk
        >>> cfg = LoaderConfig(batch_size=2, num_workers=2)
        >>> isolated(cfg, "process", sk.range(4).map(abs))
        True
        >>> isolated(cfg, "process", sk.range(4).map(sk.shares_process(abs)))
        False
    """
    return (
        cfg.worker_mode == "auto"
        and mode == "process"
        and not pipeline_shares_process(node, cfg.collate_fn)
    )
