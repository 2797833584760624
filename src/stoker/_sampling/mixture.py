"""``MixSampler``: the order in which a loader reads a map-style mixture (``sk.mix``).

The index space is the mixture's sources one after the other (source ``k``'s record
``j`` is index ``offset_k + j``); the sampler decides which source each position of
an epoch takes and which of its records:

* position ``p`` draws source ``searchsorted(cdf(w_p), u_p)`` with
  ``u_p = frac(u_0 + p * phi)``, a low-discrepancy (golden-ratio) sequence from the
  seed: the share of every source follows its weight within a few records at every
  prefix, and the draw of any position is addressable on its own;
* the source's next record is its count so far (in a fresh random order per pass
  when the loader shuffles), so no record repeats before its source runs out;
* ``w_p`` is the weights in force at ``p``: the cursor applies a change (from
  ``set_weights`` or a schedule) at the position of its next ``take``, that is
  from the next batch the loader plans, and writes it into the changes its states
  carry. A restore replays them: the order is a pure function of (seed, epoch,
  position, weight changes), whatever the workers and hosts.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._rng import epoch_rng
from .._state import state_int
from ..errors import ConfigError, StateError
from .base import IndexArray, Sampler, SamplerCursor, check_int, empty_indices
from .schedule import Change, Schedule, WeightControl, check_changes

__all__ = ["PHI", "MixCursor", "MixSampler", "Mixture", "draw_sources", "low_discrepancy_start"]

PHI = (math.sqrt(5.0) - 1.0) / 2.0
_SALT = 0x6D6978  # "mix": keeps the mixture's draws apart from other per-epoch draws


def low_discrepancy_start(seed: int, *salt: int) -> float:
    """``u_0`` of the golden-ratio sequence for ``seed`` (and ``salt``)."""
    return float(epoch_rng(seed, 0, _SALT, *salt).random())


def _cdf(weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cumulative shares; every source after the last positive one is unreachable."""
    cdf = np.cumsum(weights / weights.sum())
    last = int(np.flatnonzero(weights > 0)[-1])
    cdf[last:] = 2.0
    return cdf


def draw_sources(
    weights: NDArray[np.float64], u0: float, start: int, stop: int, cdf: Any = None
) -> NDArray[np.int64]:
    """The sources drawn at positions ``[start, stop)`` under ``weights`` (not all zero);
    ``cdf``: ``_cdf(weights)`` when the caller has it already.

    Example:
        >>> draw_sources(np.array([0.5, 0.5]), 0.0, 0, 6).tolist()
        [0, 1, 0, 1, 0, 0]
    """
    u = np.arange(start, stop, dtype=np.float64)
    u *= PHI
    u += u0
    np.remainder(u, 1.0, out=u)
    return np.searchsorted(_cdf(weights) if cdf is None else cdf, u, side="right")


@dataclass(eq=False)
class Mixture:
    """What a :class:`MixSampler` reads of a map-style ``sk.mix``: its sources' names
    and lengths, the rule for a source that runs out, the live weights (``control``,
    shared with the mixture's ``set_weights``) and the schedule.

    Example:
        >>> from stoker._sampling.schedule import WeightControl
        >>> m = Mixture(["a", "b"], [4, 2], "drop", WeightControl([0.5, 0.5]), None, [0.5, 0.5])
        >>> m.epoch_length(seed=0, u0=0.0)
        6
    """

    names: list[str]
    lengths: list[int]
    on_exhausted: str
    control: WeightControl
    schedule: Schedule | None
    start_weights: list[float]
    num_samples: int | None = None
    _stop_lengths: dict[int, int] = field(default_factory=dict, repr=False)

    def schedule_at(self, record: int) -> list[float] | None:
        """The weights the schedule sets at ``record``; None: no change there."""
        return None if self.schedule is None else self.schedule.at(record)

    def epoch_length(self, seed: int, u0: float) -> int:
        """Records per epoch: ``num_samples``, or what the rule gives at the start weights
        (``u0``: the draw's start for ``seed``)."""
        if self.num_samples is not None:
            return self.num_samples
        start = np.array(self.start_weights)  # as built: the same in every process
        if self.on_exhausted == "drop":
            return int(sum(n for n, w in zip(self.lengths, start, strict=True) if w > 0))
        if seed not in self._stop_lengths:
            self._stop_lengths[seed] = _until_one_runs_out(self.lengths, start, u0)
        return self._stop_lengths[seed]


def _until_one_runs_out(lengths: list[int], weights: NDArray[np.float64], u0: float) -> int:
    """Positions drawn before a source with a positive weight would run out."""
    lens = np.array(lengths, dtype=np.int64)
    counts = np.zeros_like(lens)
    p, block = 0, 1 << 16
    while True:
        src = draw_sources(weights, u0, p, p + block)
        cut = block
        for k in np.unique(src).tolist():
            where = np.flatnonzero(src == k)
            room = int(lens[k] - counts[k])
            if where.size > room:
                cut = min(cut, int(where[room]))
        if cut < block:
            return p + cut
        counts += np.bincount(src, minlength=lens.size)
        p += block


class MixSampler(Sampler):
    """The order of a map-style mixture over its sources' records; see the module doc.

    Built by the loader from :meth:`MixDataset.sampler`; ``shuffle`` gives every
    source a fresh record order per pass, from (seed, epoch, source, pass).

    Example:
        >>> import stoker as sk
        >>> ds = sk.mix([sk.range(0, 100), sk.range(1000, 1100)], weights=[0.75, 0.25])
        >>> ds.sampler(shuffle=False, seed=0).cursor(0).take(8).tolist()
        [100, 0, 1, 2, 3, 101, 4, 5]

    Errors:
        StateError: ``restore`` with a state of another mixture (other sources,
            names, rule) or a damaged list of weight changes.
    """

    def __init__(self, mix: Mixture, *, shuffle: bool, seed: int) -> None:
        super().__init__()
        self._mix = mix
        self._shuffle = bool(shuffle)
        self._seed = check_int(seed, "seed", minimum=0)
        self._lens = np.array(mix.lengths, dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(self._lens)[:-1]]).astype(np.int64)
        self._u0 = low_discrepancy_start(self._seed)
        self._length: int | None = None

    @property
    def source_len(self) -> int:
        return int(self._lens.sum())

    @property
    def mix(self) -> Mixture:
        """The mixture this sampler orders."""
        return self._mix

    def __len__(self) -> int:
        if self._length is None:
            self._length = self._mix.epoch_length(self._seed, self._u0)
        return self._length

    def _params(self) -> dict[str, Any]:
        return {  # the mixture first: a state of another mixture is named as such
            "sources": self._mix.names,
            "source_lens": self._lens.tolist(),
            "on_exhausted": self._mix.on_exhausted,
            **super()._params(),
            "seed": self._seed,
            "shuffle": self._shuffle,
        }

    def _check_state(self, state: object) -> Mapping[str, Any]:
        checked = super()._check_state(state)
        check_changes(checked.get("weights"), len(self._lens), repr(self))
        state_int(checked, "weights_epoch", self)
        return checked

    def _open(self, epoch: int, position: int) -> SamplerCursor:
        return MixCursor(self, epoch, position, None)

    def restore(self, state: Mapping[str, Any], *, adopt: bool = True) -> MixCursor:
        """Reopen the cursor that saved ``state``; ``adopt``: the mixture's current
        weights become the last ones the state names (False: only look)."""
        checked = self._check_state(state)
        epoch = state_int(checked, "epoch", self)
        position = state_int(checked, "position", self)
        if position > len(self):
            raise StateError(
                f"the state's position {position} is past the end of {self!r}, "
                f"which has {len(self)} records per epoch"
            )
        changes = check_changes(checked["weights"], len(self._lens), repr(self))
        if checked["weights_epoch"] != epoch:  # a state that starts the next epoch
            changes = [[0, changes[-1][1]]]
        return MixCursor(self, epoch, position, changes, adopt=adopt)

    def __repr__(self) -> str:
        return f"MixSampler(sources={self._mix.names}, shuffle={self._shuffle}, seed={self._seed})"


class MixCursor(SamplerCursor):
    """An open position in one epoch of a :class:`MixSampler`.

    ``changes`` (``[[position, weights], ...]``) is shared by every state this cursor
    returns, on purpose: a change applies from the next batch not yet planned, which
    may be planned before an earlier batch is handed out, and that earlier batch's
    state must name it.
    """

    _sampler: MixSampler

    def __init__(
        self,
        sampler: MixSampler,
        epoch: int,
        position: int,
        changes: list[Change] | None,
        *,
        adopt: bool = True,
    ) -> None:
        self._sampler = sampler
        self._epoch = epoch
        self._position = 0
        mix = sampler.mix
        k = len(sampler._lens)
        self._counts = np.zeros(k, dtype=np.int64)
        self._ended = False
        self._perms: dict[tuple[int, int], IndexArray] = {}
        self._cdfs: dict[bytes, NDArray[np.float64]] = {}
        self._base = epoch * len(sampler)  # records before this epoch, for schedules
        self._lock = threading.Lock()  # set_weights (any thread) against take (the planner)
        weights = mix.control.read()
        if changes is None:
            start = mix.schedule_at(self._base)
            changes = [[0, start if start is not None else weights]]
        elif adopt:
            mix.control.adopt(list(changes[-1][1]))
        self._changes: list[Change] = changes
        while self._position < position and not self._ended:  # replay, in bounded blocks
            self._advance(min(position - self._position, 1 << 20), emit=False)
        if adopt:
            mix.control.listen(self)

    def weights_changed(self, weights: list[float]) -> None:
        """``set_weights``: the change applies from the next position not yet planned."""
        with self._lock:
            self._record_change(self._position, list(weights))

    @property
    def counts(self) -> list[int]:
        """Records drawn from each source so far in this epoch."""
        return [int(c) for c in self._counts]

    @property
    def weights(self) -> list[float]:
        """The weights in force at the current position."""
        return self._weights_at(self._position)[0]

    def _weights_at(self, position: int) -> tuple[list[float], int | None]:
        """The weights in force at ``position`` and the position of the next change."""
        changes = self._changes
        k = bisect.bisect_right(changes, position, key=lambda c: c[0])
        following = changes[k][0] if k < len(changes) else None
        return list(changes[max(k - 1, 0)][1]), following

    def _record_change(self, position: int, weights: list[float]) -> None:
        changes = self._changes
        while len(changes) > 1 and changes[-1][0] > position:
            changes.pop()  # ahead of a restore: superseded by a change made now
        if self._weights_at(position)[0] == weights:
            return
        if changes[-1][0] == position:
            changes[-1][1] = weights
        else:
            changes.append([position, weights])

    def _sync(self, n: int) -> None:
        """Apply the changes due before the next ``n`` records are planned."""
        mix, p = self._sampler.mix, self._position
        schedule = mix.schedule
        if schedule is None:
            return
        if schedule.is_function:
            w = schedule.at(self._base + p)
            if w is not None and w != self._weights_at(p)[0]:
                self._record_change(p, w)
                mix.control.adopt(w)
            return
        first = schedule.at(self._base + p)
        if first is not None and self._changes[-1][0] <= p and first != self._weights_at(p)[0]:
            self._record_change(p, first)
        at = schedule.next_change(self._base + p)
        while at is not None and at < self._base + p + n:
            w = schedule.at(at)
            if w is not None and self._changes[-1][0] < at - self._base:
                self._changes.append([at - self._base, w])
            at = schedule.next_change(at)
        mix.control.adopt(self._changes[-1][1])

    def take(self, n: int) -> IndexArray:
        count = check_int(n, "take(n)", minimum=0)
        count = min(count, len(self._sampler) - self._position)
        if count <= 0 or self._ended:
            return empty_indices()
        with self._lock:
            self._sync(count)
            return self._advance(count, emit=True)

    def _advance(self, n: int, *, emit: bool) -> IndexArray:
        """Draw the next ``n`` positions (fewer when the rule ends the epoch)."""
        sampler = self._sampler
        lens, rule = sampler._lens, sampler.mix.on_exhausted
        out: list[IndexArray] = []
        p, end = self._position, self._position + n
        while p < end and not self._ended:
            weights, following = self._weights_at(p)
            w = np.array(weights, dtype=np.float64)
            if rule == "drop":  # sources that ran out are left out, the rest renormalised
                w[self._counts >= lens] = 0.0
            elif rule == "restart":  # an empty source has nothing to restart
                w[lens == 0] = 0.0
            if w.sum() <= 0:
                self._ended = True
                break
            stop = end if following is None else min(end, following)
            key = w.tobytes()
            cdf = self._cdfs.get(key)
            if cdf is None:
                if len(self._cdfs) > 16:
                    self._cdfs.clear()
                cdf = self._cdfs[key] = _cdf(w)
            src = draw_sources(w, sampler._u0, p, stop, cdf)
            drawn = np.bincount(src, minlength=lens.size)
            cut = src.size
            if rule != "restart" and (drawn > lens - self._counts).any():
                for k in np.flatnonzero(drawn > lens - self._counts).tolist():
                    room = int(lens[k] - self._counts[k])
                    cut = min(cut, int(np.flatnonzero(src == k)[room]))
                src = src[:cut]
                drawn = np.bincount(src, minlength=lens.size)
            if emit:  # the rank of each draw among its source's records
                small = src.astype(np.int16) if lens.size < 1 << 15 else src
                order = np.argsort(small, kind="stable")  # a radix sort for int16
                first = np.cumsum(drawn) - drawn  # where each source's group starts
                rank = np.empty(src.size, dtype=np.int64)
                grouped = src[order]
                rank[order] = np.arange(src.size) - first[grouped] + self._counts[grouped]
            self._counts += drawn
            if emit:
                out.append(self._indices(src, rank))
            p += cut
            if p < stop and rule == "stop":  # the source drawn at p has run out
                self._ended = True
        self._position = p
        if not out:
            return empty_indices()
        return out[0] if len(out) == 1 else np.concatenate(out)

    def _indices(self, src: NDArray[np.int64], rank: NDArray[np.int64]) -> IndexArray:
        sampler = self._sampler
        lens = sampler._lens
        local = rank % lens[src]
        if sampler._shuffle:
            passes = rank // lens[src]
            for k, q in set(zip(src.tolist(), passes.tolist(), strict=True)):
                where = (src == k) & (passes == q)
                local[where] = self._perm(k, q)[local[where]]
        return sampler._offsets[src] + local

    def _perm(self, source: int, pass_: int) -> IndexArray:
        key = (source, pass_)
        perm = self._perms.get(key)
        if perm is None:
            if len(self._perms) > 8:
                self._perms.clear()
            sampler = self._sampler
            rng = epoch_rng(sampler._seed, self._epoch, _SALT, source, pass_)
            perm = self._perms[key] = rng.permutation(int(sampler._lens[source]))
        return perm

    def state_dict(self) -> dict[str, Any]:
        return self._sampler._cursor_state(
            self._epoch,
            self._position,
            {"weights": self._changes, "weights_epoch": self._epoch},
        )


def check_rule(rule: object, what: str) -> str:
    """``on_exhausted`` checked: "stop", "drop" or "restart".

    Errors:
        ConfigError: another value.
    """
    if rule not in ("stop", "drop", "restart"):
        raise ConfigError(
            f"{what} on_exhausted must be 'stop' (end when a source runs out), 'drop' "
            f"(leave it out and renormalise the others) or 'restart' (read it again), "
            f"got {rule!r}"
        )
    return str(rule)
