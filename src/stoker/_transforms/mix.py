"""``mix``: several sources read in proportions that may change while the run trains.

Map-style sources make a :class:`MixDataset`; streams make a
:class:`~stoker._transforms.stream_mix.MixedStream`. Both take weights, a schedule
or ``set_weights`` calls, and a rule for a source that runs out; the weights in force
and when they changed are part of the loader's state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

import numpy as np

from .._context import Context, Skip
from .._dataset import Dataset, DatasetNode
from .._iterdataset import IterDataset
from .._sampling.base import check_int
from .._sampling.mixture import MixSampler, Mixture, check_rule
from .._sampling.schedule import Schedule, WeightControl, check_weights
from .._state import SAMPLER
from .._stats import SourceShare
from ..errors import ConfigError
from .concat import check_parts, fetch_parts, gather_parts

if TYPE_CHECKING:
    from .stream_mix import MixedStream

__all__ = ["MixDataset", "mix", "source_names"]

T = TypeVar("T")


def source_names(datasets: object) -> tuple[list[Any], list[str]]:
    """The sources of ``mix(...)`` and their names ("0", "1", ... for a list)."""
    if isinstance(datasets, Mapping):
        if not datasets:
            raise ConfigError("mix() needs at least one source, got an empty dict")
        return list(datasets.values()), [str(name) for name in datasets]
    if isinstance(datasets, Sequence) and not isinstance(datasets, str | bytes):
        return list(datasets), [str(k) for k in range(len(datasets))]
    raise ConfigError(
        f"mix() takes a list of datasets or a dict of them by name, got "
        f"{type(datasets).__name__}: mix([a, b]) or mix({{'web': a, 'code': b}})"
    )


class _Mixing:
    """What map-style and stream mixtures share: names, live weights, schedule, rule."""

    names: list[str]
    on_exhausted: str
    _control: WeightControl
    _schedule: Schedule | None
    _what = "mix()"

    def _init_mixing(self, names: list[str], weights: Any, schedule: Any, rule: object) -> None:
        self.names = names
        self.on_exhausted = check_rule(rule, self._what)
        self._schedule = None if schedule is None else Schedule(schedule, names, self._what)
        if weights is not None and self._schedule is not None:
            raise ConfigError(
                "mix() takes weights= or schedule=, not both: put the starting weights "
                "first in the schedule, at record 0"
            )
        start = None if self._schedule is None else self._schedule.at(0)
        if start is None and self._schedule is not None and not self._schedule.is_function:
            raise ConfigError("mix() schedule must start at record 0 (the starting weights)")
        if start is None:
            start = check_weights(
                [1.0] * len(names) if weights is None else weights, names, self._what
            )
        self._control = WeightControl(start)
        self._start_weights = start

    @property
    def weights(self) -> list[float]:
        """The weights (normalised) most recently set or scheduled."""
        return list(self._control.read())

    def set_weights(self, weights: Sequence[float] | Mapping[str, float]) -> None:
        """Change the mixture from the next batch the loader has not planned yet.

        The change is written into the loader's state (the weights and the position
        they apply from), so a restore replays it without calling this again. With
        ``prefetch`` or workers, batches already planned keep the old weights; with
        several hosts, prefer ``schedule=`` (every host must switch at the same batch).

        Errors:
            ConfigError: weights of the wrong count or unknown names, negative, NaN
                or infinite, or all zero; a mixture that follows ``schedule=``.
        """
        if self._schedule is not None:
            raise ConfigError(
                "this mixture follows its schedule=: build it with weights= to change "
                "the weights with set_weights()"
            )
        self._check_settable()
        self._control.set(check_weights(weights, self.names, "set_weights()"))

    def _check_settable(self) -> None:
        return None

    def _schedule_at(self, record: int) -> list[float] | None:
        return None if self._schedule is None else self._schedule.at(record)


class MixDataset(_Mixing, DatasetNode[T]):
    """Map-style sources read in changing proportions; see :func:`mix`.

    Its index space is the sources one after the other (``ds[i]`` is source ``k``'s
    record ``i - offset_k``); the mixture is the order a loader reads them in,
    :meth:`sampler`, which the loader uses whenever the mix is its dataset (also
    under ``map``, ``filter`` and ``pack``).

    Example:
        >>> import stoker as sk
        >>> ds = sk.mix({"a": sk.from_sequence("aaaaaa"), "b": sk.from_sequence("bbb")},
        ...             weights=[2, 1])
        >>> "".join(sk.DataLoader(ds, batch_size=None))
        'baaaabaab'

    Errors:
        ConfigError: see :func:`mix`.
    """

    def __init__(
        self,
        datasets: Sequence[Dataset[T]],
        names: list[str],
        weights: Any,
        *,
        schedule: Any,
        on_exhausted: str,
        num_samples: int | None,
    ) -> None:
        self._parts: list[Dataset[Any]] = check_parts(datasets, "mix")
        self.source_lengths = [len(ds) for ds in self._parts]
        self._init_mixing(names, weights, schedule, on_exhausted)
        self._num_samples = (
            None if num_samples is None else check_int(num_samples, "num_samples", minimum=1)
        )
        if self._num_samples is None and self.on_exhausted == "restart":
            self._num_samples = sum(self.source_lengths)
        self._offsets = np.cumsum([0, *self.source_lengths])
        self._len = int(self._offsets[-1])
        self._spec = Mixture(
            names=self.names,
            lengths=self.source_lengths,
            on_exhausted=self.on_exhausted,
            control=self._control,
            schedule=self._schedule,
            start_weights=self._start_weights,
            num_samples=self._num_samples,
        )
        self._report: tuple[Any, list[SourceShare]] | None = None

    def __len__(self) -> int:
        return self._len

    @property
    def may_skip(self) -> bool:
        return any(ds.may_skip for ds in self._parts)

    @property
    def releases_gil(self) -> bool:
        return all(ds.releases_gil for ds in self._parts)

    @property
    def shares_process(self) -> bool:
        return all(ds.shares_process for ds in self._parts)

    def _mixture(self) -> MixDataset[Any]:
        return self

    def sampler(self, *, shuffle: bool = False, seed: int = 0) -> MixSampler:
        """The order of the mixture for a loader (``shuffle``: records of each source in
        a fresh random order per pass)."""
        return MixSampler(self._spec, shuffle=shuffle, seed=seed)

    def _split(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        part = np.searchsorted(self._offsets, indices, side="right") - 1
        return part.astype(np.int32), indices - self._offsets[part]

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[T | Skip]:
        part, local = self._split(indices)
        return fetch_parts(self._parts, part, local, ctx)

    def _record_name(self, index: int, ctx: Context) -> str | None:
        part, local = self._split(np.array([index], dtype=np.int64))
        k = int(part[0])
        return self._parts[k]._record_name(int(local[0]), ctx.child(k))

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        part, local = self._split(indices)
        return gather_parts(self._parts, part, local, ctx, out)

    def _mixture_report(self, state: Mapping[str, Any] | None) -> list[SourceShare]:
        """The share of each source drawn so far in the epoch of the loader ``state``."""
        entry = None if state is None else state.get(SAMPLER)
        key = None if entry is None else (entry.get("epoch"), entry.get("position"), id(entry))
        if self._report is not None and self._report[0] == key and key is not None:
            return self._report[1]
        if not isinstance(entry, Mapping) or entry.get("kind") != "MixSampler":
            counts, weights = [0] * len(self.names), self.weights
        else:
            sampler = self.sampler(shuffle=bool(entry["shuffle"]), seed=int(entry["seed"]))
            cursor = sampler.restore(entry, adopt=False)
            counts, weights = cursor.counts, cursor.weights
        report = shares(self.names, weights, counts)
        self._report = (key, report)
        return report

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_report"] = None
        return state


def shares(names: list[str], weights: list[float], counts: list[int]) -> list[SourceShare]:
    """One :class:`SourceShare` per source."""
    total = sum(counts)
    return [
        SourceShare(name=n, weight=w, share=c / total if total else 0.0, records=c)
        for n, w, c in zip(names, weights, counts, strict=True)
    ]


@overload
def mix(
    datasets: Sequence[Dataset[T]] | Mapping[str, Dataset[T]],
    weights: Sequence[float] | Mapping[str, float] | None = None,
    *,
    schedule: Sequence[tuple[int, Any]] | Callable[[int], Any] | None = None,
    on_exhausted: str = "stop",
    num_samples: int | None = None,
) -> MixDataset[T]: ...
@overload
def mix(
    datasets: Sequence[IterDataset[T]] | Mapping[str, IterDataset[T]],
    weights: Sequence[float] | Mapping[str, float] | None = None,
    *,
    schedule: Sequence[tuple[int, Any]] | Callable[[int], Any] | None = None,
    on_exhausted: str = "stop",
    num_samples: int | None = None,
) -> MixedStream[T]: ...
def mix(
    datasets: Any,
    weights: Sequence[float] | Mapping[str, float] | None = None,
    *,
    schedule: Sequence[tuple[int, Any]] | Callable[[int], Any] | None = None,
    on_exhausted: str = "stop",
    num_samples: int | None = None,
) -> MixDataset[Any] | MixedStream[Any]:
    """Read several sources in proportion to weights that may change during training.

    Position ``p`` of the mixture takes source ``k`` with share ``w_k`` (weights are
    normalised); which source each position takes follows a golden-ratio
    low-discrepancy sequence from the seed, so every prefix of the mixture follows
    the weights within a few records, and each source's records come in order (in a
    fresh random order per pass with ``DataLoader(shuffle=True)``; for streams, in
    the stream's order). The order is a pure function of (seed, epoch, position,
    weight changes).

    Weights change in three ways; each applies from the next batch the loader has
    not planned yet, and the loader's state records the weights in force and the
    position of every change (a few numbers per change), so a restore in a new
    process, with any ``num_workers`` (and, for map-style sources, any host count),
    replays them exactly:

    * ``mix.set_weights(w)`` while the loader runs;
    * ``schedule=[(record, weights), ...]``: weights from record ``record`` on, records
      counted from the start of epoch 0 (map-style: ``num_samples`` records per
      epoch; streams: the records this reader of the mixture handed out in the epoch).
      With batches of ``b`` records, step ``s`` starts at record ``s * b``;
    * ``schedule=fn``: ``fn(record) -> weights``, asked before every planned batch
      (map-style) or record (streams).

    When a source runs out (``on_exhausted``):

    * ``"stop"`` (default): the epoch ends just before the first record it cannot
      give; with fixed weights every record is read at most once per epoch;
    * ``"drop"``: it is left out and the others' weights renormalised; the epoch ends
      when every source with a positive weight has run out, so each is read exactly
      once per epoch;
    * ``"restart"``: it is read again from its start (map-style, with
      ``shuffle=True``: in a new random order), so the weights hold for the whole
      epoch; map-style epochs then have ``num_samples`` records (default: all
      sources' records).

    Args:
        datasets: map-style datasets, or streams (``IterDataset``), as a list or a
            dict by name (names show in ``it.stats().mixture`` and in errors).
        weights: one share per source (>= 0, not all zero), a list or a dict by
            name; equal shares when None.
        schedule: weights given up front instead of ``weights``, see above.
        on_exhausted: "stop", "drop" or "restart".
        num_samples: map-style only: records per epoch (default: see
            ``on_exhausted``; with "stop", until the first source runs out at the
            starting weights).

    Returns:
        A :class:`MixDataset` (map-style) or a ``MixedStream`` (streams).

    Example:
        >>> import stoker as sk
        >>> ds = sk.mix({"web": sk.range(0, 100), "code": sk.range(1000, 1100)},
        ...             weights=[0.75, 0.25])
        >>> loader = sk.DataLoader(ds, batch_size=4)
        >>> it = iter(loader)
        >>> next(it).tolist()
        [1000, 0, 1, 2]
        >>> ds.set_weights({"web": 0, "code": 1})
        >>> next(it).tolist()
        [1001, 1002, 1003, 1004]
        >>> [round(s.share, 2) for s in it.stats().mixture]
        [0.38, 0.62]

    Errors:
        ConfigError: no sources, a non-dataset, streams and map-style sources
            together, an empty map-style source; weights of the wrong count, negative,
            NaN, infinite or all zero (naming the values); a schedule that is not
            increasing in records or does not start at record 0; ``weights`` and
            ``schedule`` together; an unknown ``on_exhausted``; ``num_samples`` for
            streams.
        StateError: restoring a state whose mixture names other sources (another
            count, names or lengths) or another rule.
    """
    parts, names = source_names(datasets)
    if parts and all(isinstance(ds, IterDataset) for ds in parts):
        if num_samples is not None:
            raise ConfigError(
                "mix() over streams takes no num_samples: a stream mixture ends by its "
                "on_exhausted rule; cut it with .batch() and your step count instead"
            )
        from .stream_mix import MixedStream

        return MixedStream(parts, names, weights, schedule=schedule, on_exhausted=on_exhausted)
    if any(isinstance(ds, IterDataset) for ds in parts):
        raise ConfigError(
            "mix() needs all sources map-style or all streams (IterDataset), got both: "
            "turn the map-style ones into streams with sk.from_iterable(lambda: iter(ds))"
        )
    return MixDataset(
        parts,
        names,
        weights,
        schedule=schedule,
        on_exhausted=on_exhausted,
        num_samples=num_samples,
    )
