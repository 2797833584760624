"""``PassSpec``: what one pass over an epoch needs from its loader, handed over once.

A :class:`~stoker.DataLoader` is a description; a
:class:`~stoker._iterator.LoaderIterator` is one pass. For every pass the loader
hands its iterator one frozen ``PassSpec``: the checked config, the dataset, the
sampler, this host's shard, the state header, the settings the loader worked out
once (the worker mode with ``"auto"`` resolved, the depth, the pool sizes) and how
to lease the loader's workers. The spec's three methods are the data path of
DESIGN.md, one stage each: the epoch's :meth:`~PassSpec.plan` (stages 2-4), the
:meth:`~PassSpec.executor` (stage 5) and the :meth:`~PassSpec.window` of batches
in flight (stage 6, :func:`open_window`). Nothing below the loader reads the
loader's own members.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple, Protocol

from ._batching.builder import BatchBuilder
from ._config import LoaderConfig
from ._dataset import Dataset
from ._epoch.choose import epoch_plan
from ._epoch.plan import EpochPlan
from ._exec.ahead import AheadExecutor
from ._exec.executor import Executor
from ._exec.inline import InlineExecutor
from ._exec.jobs import Tally
from ._exec.make import Lease, pass_executor
from ._hosts import Shard
from ._iterdataset import IterDataset
from ._sampling.base import Sampler
from ._settings import Settings
from ._window import JobWindow

__all__ = ["PassSpec", "PassWindow", "Reopens", "open_window"]


class Reopens(Protocol):
    """The loader as its iterators see it: public methods only.

    ``len()`` counts an epoch's batches; ``iter(state=...)`` rebuilds an iterator
    (what unpickling one does).
    """

    def __len__(self) -> int: ...

    def iter(self, *, epoch: int | None = None, state: dict[str, Any] | None = None) -> Any: ...


@dataclass(frozen=True, eq=False)
class PassSpec:
    """What one pass needs from its loader (see the module docstring).

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> from stoker._exec.jobs import Tally
        >>> from stoker._hosts import ONE_HOST
        >>> from stoker._sampling.sequential import SequentialSampler
        >>> from stoker._settings import settings_for
        >>> cfg, ds = LoaderConfig(batch_size=3), sk.range(6)
        >>> spec = PassSpec(cfg, ds, SequentialSampler(6), ONE_HOST, {},
        ...                 settings_for(cfg, ds), lease=None, loader=None)
        >>> plan, builder = spec.plan(0, None)
        >>> executor, token, give_back = spec.executor()
        >>> window = spec.window(plan, executor, token, Tally(10), None, 0).window
        >>> window.get()[0].tolist()
        [0, 1, 2]
        >>> window.close(); give_back(); builder.close()
    """

    config: LoaderConfig
    dataset: Dataset[Any] | IterDataset[Any]
    sampler: Sampler | None
    hosts: Shard
    header: dict[str, Any]
    settings: Settings
    """What the config and the pipeline decide (the worker mode, the depth, the pools),
    worked out once by the loader."""
    lease: Lease
    """Lends the loader's workers to a pass (never called under ``mode="inline"``)."""
    loader: Reopens
    """The loader, for ``len()`` and for pickling an iterator (public methods only)."""

    @property
    def mode(self) -> str:
        """The worker mode: "inline", "thread", "process" or "ray" ("auto" resolved)."""
        return self.settings.mode

    @property
    def isolated(self) -> bool:
        """``worker_mode="auto"`` runs user code not marked safe to share the training
        process in worker processes only (see :func:`~stoker.shares_process`)."""
        return self.settings.isolated

    def plan(
        self, epoch: int, state: dict[str, Any] | None
    ) -> tuple[EpochPlan, BatchBuilder | None]:
        """Stages 2-4: the epoch's plan (which records make each batch, and the state
        after it) and the batch builder it fills, if any."""
        return epoch_plan(
            self.config,
            self.dataset,
            self.sampler,
            self.hosts,
            self.header,
            self.settings,
            epoch,
            state,
        )

    def executor(self) -> tuple[Executor, int, Callable[[], None]]:
        """Stage 5: the executor the plan's jobs run on, its token, and how to give it
        back."""
        return pass_executor(self.mode, self.config, self.dataset, self.lease, self.settings)

    def window(
        self,
        plan: EpochPlan,
        executor: Executor,
        token: int,
        tally: Tally,
        state: dict[str, Any] | None,
        epoch: int,
    ) -> PassWindow:
        """Stage 6: the window of ``plan``'s batches in flight on ``executor``."""
        return open_window(
            plan,
            executor,
            token,
            self.config,
            self.settings,
            tally,
            ahead=state.get("ahead", ()) if state is not None else (),
            name=f"stoker-prefetch-epoch{epoch}",
        )


class PassWindow(NamedTuple):
    """Stage 6 of one pass, as :func:`open_window` opens it."""

    window: JobWindow
    """The window of jobs: ``get()`` returns (batch, state, records)."""
    tuned: JobWindow | None
    """The window of jobs when every job is one batch (the tuner sets its depth)."""
    keep_going: bool
    """After an error of one batch, the next ``get()`` goes on with the next batch
    (False where reads run ahead across batches on workers: a stream's parts, batches
    filled past a filter)."""


def open_window(
    plan: EpochPlan,
    executor: Executor,
    token: int,
    cfg: LoaderConfig,
    settings: Settings,
    tally: Tally,
    *,
    ahead: Iterable[int] = (),
    name: str = "stoker-prefetch",
) -> PassWindow:
    """Stage 6 of one pass: the window of batches in flight for ``plan`` on ``executor``.

    ``settings`` say how far ahead, and whether the pass has workers (without, its
    executor builds a job when asked); ``ahead`` names the batches a state saved
    with ``ordered=False`` already handed out; ``tally`` hears of every job's result.

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> from stoker._epoch.choose import epoch_plan
        >>> from stoker._exec.make import pass_executor
        >>> from stoker._hosts import ONE_HOST
        >>> from stoker._sampling.sequential import SequentialSampler
        >>> from stoker._settings import settings_for
        >>> cfg, ds = LoaderConfig(batch_size=2), sk.range(4)
        >>> settings = settings_for(cfg, ds)
        >>> plan, builder = epoch_plan(
        ...     cfg, ds, SequentialSampler(4), ONE_HOST, {}, settings, 0, None
        ... )
        >>> ex, token, give_back = pass_executor("inline", cfg, ds, None, settings)
        >>> opened = open_window(plan, ex, token, cfg, settings, Tally(10))
        >>> [opened.window.get()[0].tolist() for _ in range(2)], opened.keep_going
        ([[0, 1], [2, 3]], True)
        >>> opened.window.close(); give_back(); builder.close()
    """
    start_ahead = None
    if isinstance(executor, InlineExecutor):  # a thread builds ahead when it pays off
        start_ahead = partial(AheadExecutor, executor.runtime.run, name)
    jobs = JobWindow(
        plan,
        tally,
        executor,
        depth=settings.window_depth(plan.parts),
        ordered=cfg.ordered,
        timeout=settings.timeout,
        start_state=plan.state(),
        ahead=ahead,
        token=token,
        prefetch=settings.inline_prefetch,
        start_ahead=start_ahead,
    )
    tuned = jobs if plan.job_per_batch else None
    inline = settings.mode == "inline"
    return PassWindow(jobs, tuned, keep_going=inline or plan.job_per_batch)
