"""``TokenBatchSampler``: batches by a budget of tokens, balanced across hosts.

See :mod:`stoker._sampling.token_plan` for how an epoch is planned. This module holds
the sampler (its arguments, checks and cache) and its cursor: an open position in one
host's batches of one epoch, whose state is the list of ``[hosts, steps]`` segments
walked so far.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._hosts import ONE_HOST, Shard
from .._state import check_fields, state_int
from ..errors import ConfigError, StateError
from .base import check_int
from .stateful import EpochStateful
from .token_plan import CostFn, Step, batch_cost, deal_steps, default_window, epoch_records

__all__ = ["TokenBatchSampler", "TokenCursor"]

Segments = list[list[int]]


class TokenCursor:
    """One host's open position in one epoch of a :class:`TokenBatchSampler`.

    Example:
        >>> sampler = TokenBatchSampler([4, 4, 8, 8], max_tokens=16, shuffle=False)
        >>> cursor = sampler.host_cursor(0)
        >>> cursor.next_batch().tolist(), cursor.state_dict()["segments"]
        ([2, 3], [[1, 1]])
    """

    def __init__(
        self,
        owner: TokenBatchSampler,
        epoch: int,
        hosts: Shard,
        done: Segments,
        step: int,
        seed: int,
    ) -> None:
        self._owner = owner
        self._epoch = epoch
        self._hosts = hosts
        self._done = done
        self._step = step
        self._steps = owner.steps(epoch, hosts=hosts.count, done=done, seed=seed)
        if step > len(self._steps):
            raise StateError(
                f"the state is at step {step} of a segment of {len(self._steps)} steps: it "
                "was saved with another TokenBatchSampler"
            )

    @property
    def epoch(self) -> int:
        """The epoch this cursor walks."""
        return self._epoch

    @property
    def batches(self) -> int:
        """Batches this host has handed out in the epoch, all segments together."""
        return sum(steps for _, steps in self._done) + self._step

    def remaining(self) -> int:
        """Batches left for this host in the epoch."""
        return len(self._steps) - self._step

    def next_batch(self) -> NDArray[np.int64] | None:
        """This host's next batch, or None at the end of the epoch."""
        if self._step >= len(self._steps):
            return None
        batch = self._steps[self._step][self._hosts.index]
        self._step += 1
        return batch

    def state_dict(self) -> dict[str, Any]:
        """The position: the sampler's arguments, the epoch and the segments walked."""
        segments = [*self._done, [self._hosts.count, self._step]]
        return {**self._owner._fields(), "epoch": self._epoch, "segments": segments}

    def __iter__(self) -> Iterator[list[int]]:
        while (batch := self.next_batch()) is not None:
            yield batch.tolist()


class TokenBatchSampler(EpochStateful[TokenCursor]):
    """Batches of variable-length records under a budget of tokens.

    Records are drawn in a shuffled order (from ``(seed, epoch)``), grouped by length
    inside windows of ``window`` records, and cut greedily so that each batch's cost
    stays within ``max_tokens``; the batches are then shuffled. Every record is in
    exactly one batch per epoch. A record longer than the budget on its own is a batch
    of its own (never dropped).

    With several hosts (``shard=`` on the loader), the batches are dealt in steps of one
    batch per host, the batches of a step of close cost, and every host gets the same
    number of batches (a batch is split in two when the count does not divide; with
    ``drop_last=True`` the final partial step is dropped instead). A state saved in
    mid-epoch resumes exactly on any number of workers and on any number of hosts:
    the rest of the epoch is dealt again, nothing lost or repeated.

    Args:
        lengths: one length per record (ints >= 0), e.g. ``ds.lengths("tokens")``.
        max_tokens: the budget of one batch.
        cost: ``"padded"`` (batch size times its longest record: the memory of a padded
            batch), ``"tokens"`` (the sum of lengths: for packing), or a callable on the
            list of a batch's lengths.
        window: records sorted together; None chooses about 64 batches' worth.
        seed: the order's seed; None takes the loader's ``seed`` (0 when iterated
            directly).
        shuffle: False keeps the records' order before the windows and the batches'
            order after them (a deterministic, unshuffled plan).
        drop_last: drop the final partial step when the batches do not divide among
            the hosts.

    Example:
        >>> import stoker as sk
        >>> lengths = [5, 9, 3, 12, 7, 4, 8, 6]
        >>> sampler = sk.TokenBatchSampler(lengths, max_tokens=24, seed=0)
        >>> batches = list(sampler)
        >>> sorted(i for b in batches for i in b)
        [0, 1, 2, 3, 4, 5, 6, 7]
        >>> all(len(b) * max(lengths[i] for i in b) <= 24 for b in batches)
        True

    Errors:
        ConfigError: lengths that are not ints >= 0, a budget below 1, an unknown cost,
            a window below 1, or fewer records than hosts.
        StateError: a state from a sampler with other arguments.
    """

    def __init__(
        self,
        lengths: Sequence[int] | NDArray[np.integer[Any]],
        max_tokens: int,
        *,
        cost: CostFn = "padded",
        window: int | None = None,
        seed: int | None = None,
        shuffle: bool = True,
        drop_last: bool = False,
    ) -> None:
        self._lengths = _as_lengths(lengths)
        self._max_tokens = check_int(max_tokens, "max_tokens", minimum=1)
        if not (cost in ("padded", "tokens") or callable(cost)):
            raise ConfigError(
                f"cost must be 'padded', 'tokens' or a callable on a batch's list of "
                f"lengths, got {cost!r}"
            )
        self._cost: CostFn = cost
        if window is None:
            window = default_window(self._lengths, self._max_tokens)
        self._window = check_int(window, "window", minimum=1)
        self._seed = None if seed is None else check_int(seed, "seed", minimum=0)
        self._shuffle = bool(shuffle)
        self._drop_last = bool(drop_last)
        self._cache: dict[tuple[Any, ...], list[Step]] = {}

    # -- the plan -------------------------------------------------------------------

    @property
    def lengths(self) -> NDArray[np.int64]:
        """The records' lengths (read-only)."""
        return self._lengths

    @property
    def max_tokens(self) -> int:
        """The budget of one batch."""
        return self._max_tokens

    @property
    def source_len(self) -> int:
        """The number of records."""
        return len(self._lengths)

    def cost_of(self, batch: Sequence[int]) -> float:
        """The cost of a batch of record indices under this sampler's ``cost``."""
        return batch_cost(self._lengths[np.asarray(batch, dtype=np.int64)], self._cost)

    def steps(
        self,
        epoch: int,
        *,
        hosts: int = 1,
        done: Sequence[Sequence[int]] = (),
        seed: int | None = None,
    ) -> list[Step]:
        """The steps of the segment after ``done`` (``[hosts, steps]`` pairs walked).

        Computed once per ``(epoch, hosts, done, seed)`` and kept (the last few).
        """
        seed = self._seed if self._seed is not None else (seed or 0)
        key = (epoch, hosts, tuple(tuple(s) for s in done), seed)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        n = len(self._lengths)
        records = epoch_records(n, shuffle=self._shuffle, seed=seed, epoch=epoch)
        for number, (count, taken) in enumerate(done):
            seg = self._deal(records, count, seed, epoch, number)
            used = [b for step in seg[:taken] for b in step]
            if used:
                records = records[~np.isin(records, np.concatenate(used))]
        steps = self._deal(records, hosts, seed, epoch, len(done))
        if len(self._cache) >= 4:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = steps
        return steps

    def _deal(self, records: Any, hosts: int, seed: int, epoch: int, segment: int) -> list[Step]:
        return deal_steps(
            records,
            self._lengths,
            max_tokens=self._max_tokens,
            cost=self._cost,
            window=self._window,
            hosts=hosts,
            shuffle=self._shuffle,
            drop_last=self._drop_last,
            seed=seed,
            epoch=epoch,
            segment=segment,
        )

    def num_batches(self, epoch: int, hosts: int = 1, seed: int | None = None) -> int:
        """Batches each host gets in ``epoch`` (the same for every host)."""
        return len(self.steps(epoch, hosts=hosts, seed=seed))

    def host_cursor(
        self,
        epoch: int,
        hosts: Shard = ONE_HOST,
        state: Mapping[str, Any] | None = None,
        seed: int | None = None,
    ) -> TokenCursor:
        """Open one host's batches of ``epoch``, at ``state`` if given (its ``segments``
        re-dealt for this host count when it differs).

        Errors:
            StateError: a state from another sampler, or of another epoch.
        """
        if state is None:
            return TokenCursor(self, epoch, hosts, [], 0, self._seed_for(seed))
        segments = self._check(state, epoch)
        if segments and segments[-1][0] == hosts.count:
            done, step = segments[:-1], segments[-1][1]
        else:
            done, step = segments, 0
        return TokenCursor(self, epoch, hosts, done, step, self._seed_for(seed))

    def _seed_for(self, seed: int | None) -> int:
        return self._seed if self._seed is not None else (seed or 0)

    # -- states ---------------------------------------------------------------------

    def _fields(self) -> dict[str, Any]:
        cost = self._cost if isinstance(self._cost, str) else "callable"
        return {
            "kind": "TokenBatchSampler",
            "source_len": len(self._lengths),
            "max_tokens": self._max_tokens,
            "cost": cost,
            "window": self._window,
            "shuffle": self._shuffle,
            "drop_last": self._drop_last,
        }

    def _check(self, state: Mapping[str, Any], epoch: int | None) -> Segments:
        checked = check_fields(state, self._fields(), self)
        at = state_int(checked, "epoch", self)
        if epoch is not None and at != epoch:
            raise StateError(f"the state is at epoch {at}, not {epoch}: pass the state saved")
        segments = checked.get("segments")
        ok = isinstance(segments, list) and all(
            isinstance(s, list)
            and len(s) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in s)
            and s[0] >= 1
            and s[1] >= 0
            for s in segments
        )
        if not ok:
            raise StateError(
                f"the state's 'segments' must be a list of [hosts, steps] pairs, got "
                f"{segments!r}: pass a state returned by state_dict(), unchanged"
            )
        return [list(s) for s in segments]  # type: ignore[union-attr]

    # torch-style stateful use (EpochStateful): one host, the sampler's own seed

    def _start_cursor(self, epoch: int) -> TokenCursor:
        return self.host_cursor(epoch)

    def _resume_cursor(self, state: Mapping[str, Any]) -> TokenCursor:
        return self.host_cursor(state_int(state, "epoch", self), state=state)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._next_cursor())

    def __len__(self) -> int:
        """Batches of the epoch chosen with ``set_epoch`` (0 until set), one host."""
        return self.num_batches(self._epoch)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_cache"] = {}
        return state

    def __repr__(self) -> str:
        return (
            f"TokenBatchSampler({len(self._lengths)} records, max_tokens={self._max_tokens}, "
            f"cost={self._fields()['cost']!r})"
        )


def _as_lengths(lengths: Any) -> NDArray[np.int64]:
    try:
        arr = np.asarray(lengths)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"lengths must be a sequence of ints: {exc}") from exc
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        if arr.ndim == 1 and arr.dtype == object:
            try:
                arr = np.array([operator.index(v) for v in arr], dtype=np.int64)
            except TypeError as exc:
                raise ConfigError(f"lengths must be ints, one per record: {exc}") from exc
        else:
            raise ConfigError(
                f"lengths must be a 1-D sequence of ints, one per record, got an array of "
                f"shape {arr.shape} and dtype {arr.dtype}"
            )
    out = arr.astype(np.int64)
    if out.size and out.min() < 0:
        bad = int(np.argmin(out))
        raise ConfigError(f"lengths must be >= 0: record {bad} has length {int(out[bad])}")
    out.flags.writeable = False
    return out
