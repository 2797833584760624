"""``Settings``: what a loader's other settings decide, worked out once, in one place.

The worker mode (``"auto"`` resolved), whether user code is kept out of the
training process, the batches in flight, how far ahead the inline prefetch thread
builds, and the sizes of the batch-buffer pools all follow from the
:class:`~stoker._config.LoaderConfig` and the pipeline's own properties. The loader
works them out once (:func:`settings_for`) and hands them down to the plan, the
executor and the window; nothing below recomputes them.

``worker_mode="auto"`` picks threads when the whole pipeline releases the GIL.
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

from dataclasses import dataclass
from typing import Any

from ._collate import default_collate
from ._config import DEFAULT_DEPTH, LoaderConfig
from ._dataset import Dataset
from ._iterdataset import IterDataset
from ._tuning import in_flight
from ._typing import is_marked, may_share

__all__ = [
    "Settings",
    "isolated",
    "pipeline_releases_gil",
    "pipeline_shares_process",
    "settings_for",
]

_SPARE_SLOTS = 3  # buffers beyond those in flight: the batch the loop holds, and two more


@dataclass(frozen=True, slots=True)
class Settings:
    """The settings derived from a loader's config and pipeline (see the module docstring).

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> s = settings_for(LoaderConfig(batch_size=4, num_workers=2), sk.range(8))
        >>> s.mode, s.isolated, s.depth, s.worker_slots
        ('thread', False, 4, 8)
    """

    mode: str
    """The worker mode: "inline", "thread", "process" or "ray" ("auto" resolved)."""
    isolated: bool
    """``worker_mode="auto"`` runs user code not marked safe to share the training
    process in worker processes only (see :func:`isolated`)."""
    depth: int
    """Batches in flight on the workers (1 without workers: built when asked for)."""
    timeout: float | None
    """How long the window waits for a batch built on another thread (None: no limit)."""
    inline_prefetch: int | None
    """Without workers, batches a prefetch thread builds ahead (0: none, on the
    asking thread; None: decided by probing the first batches)."""
    pool_slots: int
    """Batch buffers of the parent's builder and of an inline executor."""
    worker_slots: int
    """Batch buffers of the thread workers, and the shared-memory slots of the
    process workers."""
    tuned_slots: int
    """The same, when ``auto`` tunes the workers (the tuner may raise the depth)."""

    def part_depth(self, parts: int) -> int:
        """Reads in flight for each of ``parts`` stream parts, for :attr:`depth` batches.

        Example:
            >>> Settings("thread", False, 5, None, 0, 5, 9, 12).part_depth(2)
            3
        """
        return max(1, -(-self.depth // parts))

    def window_depth(self, parts: int) -> int:
        """Jobs the window keeps in flight: :attr:`depth`, or for a stream split in
        ``parts`` (0: none) the same number of reads ahead in every part.

        Example:
            >>> s = Settings("thread", False, 5, None, 0, 5, 9, 12)
            >>> s.window_depth(0), s.window_depth(2)
            (5, 6)
        """
        return self.part_depth(parts) * parts if parts else self.depth


def settings_for(cfg: LoaderConfig, dataset: Dataset[Any] | IterDataset[Any]) -> Settings:
    """Work out the :class:`Settings` of a loader with config ``cfg`` over ``dataset``.

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> settings_for(LoaderConfig(batch_size=2), sk.range(4)).inline_prefetch is None
        True
    """
    mode = _mode(cfg, dataset)
    workers = mode != "inline"
    depth = in_flight(cfg.prefetch, cfg.num_workers) if workers else 1
    return Settings(
        mode=mode,
        isolated=isolated(cfg, mode, dataset),
        depth=depth,
        timeout=cfg.timeout,
        inline_prefetch=_inline_prefetch(cfg),
        pool_slots=(cfg.prefetch if cfg.prefetch is not None else DEFAULT_DEPTH) + _SPARE_SLOTS,
        worker_slots=depth + _SPARE_SLOTS + 1,
        tuned_slots=4 * cfg.num_workers + 4,
    )


def _mode(cfg: LoaderConfig, dataset: Dataset[Any] | IterDataset[Any]) -> str:
    """The execution mode: "inline", "thread", "process" or "ray" ("auto" decided)."""
    if cfg.num_workers == 0:
        return "inline"
    if cfg.worker_mode != "auto":
        return cfg.worker_mode
    return "thread" if pipeline_releases_gil(dataset, cfg.collate_fn) else "process"


def _inline_prefetch(cfg: LoaderConfig) -> int | None:
    """Batches the inline prefetch thread builds ahead (None: decided by probing)."""
    if cfg.prefetch is None and cfg.timeout is not None:
        return DEFAULT_DEPTH  # the timeout watches the prefetch thread
    return cfg.prefetch


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
