"""``WeightedSampler``: indices drawn in proportion to weights that may change in training."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._rng import epoch_rng
from ..errors import ConfigError, StateError
from .base import EpochOrder, IndexArray, IndexCursor, Sampler, SamplerCursor, check_int
from .weight_table import WeightTable, weight_table

__all__ = ["WeightedSampler"]

_BLOCK = 4096
"""Draws with replacement come in blocks of this many positions, one generator each."""

INLINE_WEIGHTS = 10_000
"""States carry up to this many weights as a list; more, as a digest that the sampler
must know (``register_weights``) when it restores the state."""


class _WithReplacement(EpochOrder):
    """Draw ``p`` is ``searchsorted(cdf, u_p)``; ``u_p`` comes from position ``p``'s block.

    ``changes`` lists the weights in force from each position on; ``set_weights``
    adds one at the first position no cursor has taken yet (``weights_changed``).
    """

    def __init__(
        self,
        sampler: WeightedSampler,
        epoch: int,
        position: int,
        changes: list[tuple[int, WeightTable]] | None = None,
    ) -> None:
        self._sampler = sampler
        self._epoch = epoch
        self._lock = threading.Lock()
        self._frontier = position  # the first position not yet taken
        self._tables = changes if changes is not None else [(0, sampler._table)]
        self._saved: list[list[Any]] = [[at, sampler._entry(t)] for at, t in self._tables]
        sampler._orders.add(self)

    def weights_changed(self, table: WeightTable) -> None:
        with self._lock:
            at = self._frontier
            while len(self._tables) > 1 and self._tables[-1][0] >= at:
                self._tables.pop()
                self._saved.pop()
            if self._tables[-1][0] >= at:
                self._tables[-1] = (at, table)
                self._saved[-1] = [at, self._sampler._entry(table)]
            else:
                self._tables.append((at, table))
                self._saved.append([at, self._sampler._entry(table)])

    def _uniforms(self, block: int) -> NDArray[np.float64]:
        cached: tuple[int, NDArray[np.float64]] | None = self._cache
        if cached is not None and cached[0] == block:
            return cached[1]
        u = epoch_rng(self._sampler.seed, self._epoch, block).random(_BLOCK)
        self._cache = (block, u)
        return u

    def indices(self, start: int, stop: int) -> IndexArray:
        parts = []
        for block in range(start // _BLOCK, (stop - 1) // _BLOCK + 1):
            base = block * _BLOCK
            lo, hi = max(start, base) - base, min(stop, base + _BLOCK) - base
            parts.append(self._uniforms(block)[lo:hi])
        u = parts[0] if len(parts) == 1 else np.concatenate(parts)
        with self._lock:
            self._frontier = max(self._frontier, stop)
            tables = list(self._tables)
        drawn = np.empty(u.size, dtype=np.int64)
        for k, (at, table) in enumerate(tables):
            end = tables[k + 1][0] if k + 1 < len(tables) else stop
            lo, hi = max(at, start) - start, min(end, stop) - start
            if lo < hi:
                d = np.searchsorted(table.cdf, u[lo:hi], side="right")
                drawn[lo:hi] = np.minimum(d, table.weights.size - 1)
        return drawn

    def state_fields(self) -> dict[str, Any]:
        # The list is shared by every state of this cursor: a change applies from the
        # first position not yet taken, and the state of a batch planned before it
        # must still name it.
        return {
            "weights": self._tables[-1][1].digest,
            "weight_changes": self._saved,
            "weights_epoch": self._epoch,
        }

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


class _WithoutReplacement(EpochOrder):
    """An Efraimidis-Spirakis weighted permutation, cut to ``num_samples``.

    Uses the weights current when the epoch's cursor was opened.
    """

    def __init__(
        self, sampler: WeightedSampler, epoch: int, table: WeightTable | None = None
    ) -> None:
        self._sampler = sampler
        self._epoch = epoch
        self._table = sampler._table if table is None else table
        # The state names the epoch's weights at 0 and, once set_weights was called,
        # the new ones at the end of the epoch: the next epoch starts with them.
        self._saved: list[list[Any]] = [[0, sampler._entry(self._table)]]
        sampler._orders.add(self)

    def weights_changed(self, table: WeightTable) -> None:
        entry = [len(self._sampler), self._sampler._entry(table)]
        if len(self._saved) > 1:
            self._saved[1] = entry
        elif len(self._sampler) > 0:
            self._saved.append(entry)

    def indices(self, start: int, stop: int) -> IndexArray:
        order: IndexArray | None = self._cache
        if order is None:
            order = self._cache = self._sampler._weighted_permutation(self._epoch, self._table)
        return order[start:stop].copy()

    def state_fields(self) -> dict[str, Any]:
        return {
            "weights": self._table.digest,
            "weight_changes": self._saved,
            "weights_epoch": self._epoch,
        }


class WeightedSampler(Sampler):
    """Indices drawn with probability proportional to ``weights``.

    With replacement, the draw at each position of an epoch is addressable on its own,
    so a saved position is a few integers. ``set_weights`` applies to every draw that
    no cursor has taken yet, including the rest of the current epoch.

    Without replacement, an epoch is one weighted permutation (Efraimidis-Spirakis)
    of the records with a positive weight, cut to ``num_samples``; it uses the weights
    current when the epoch's cursor is opened, so ``set_weights`` applies from the
    next cursor (normally the next epoch).

    Saved states carry the weights in force and the position of every change
    (``weight_changes``, O(number of changes)), so ``restore``, in a new process too,
    replays them without ``set_weights`` being called again, and the sampler goes on
    with the last of them. Up to ``INLINE_WEIGHTS`` (10,000) weights travel in the
    state as a list; longer ones as a digest: in a new process, call
    :meth:`register_weights` with each such set of weights before restoring.

    Args:
        weights: one non-negative, finite weight per record; not all zero.
        num_samples: indices per epoch; defaults to ``len(weights)``.
        replacement: draw with replacement (the same record may repeat in an epoch).
        seed: an int >= 0.

    Example:
        >>> from stoker import WeightedSampler
        >>> sampler = WeightedSampler([0.0, 1.0, 3.0], num_samples=6, seed=0)
        >>> draws = sampler.cursor(epoch=0).take(6).tolist()
        >>> len(draws), 0 in draws
        (6, False)

    Errors:
        ConfigError: weights that are not 1-D, are empty, negative, NaN or infinite, or
            all zero (naming the first offending index); ``num_samples < 1``; without
            replacement, ``num_samples`` above the number of positive weights;
            ``set_weights`` with a different number of weights.
        StateError: ``restore`` with a state from another sampler, or one that names
            weights by a digest that was never registered.
    """

    INLINE_WEIGHTS: ClassVar[int] = INLINE_WEIGHTS
    """States carry at most this many weights as a list, more as a digest."""

    def __init__(
        self,
        weights: ArrayLike,
        num_samples: int | None = None,
        replacement: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        table = weight_table(weights)
        if not isinstance(replacement, bool):
            raise ConfigError(f"replacement must be True or False, got {replacement!r}")
        self._replacement = replacement
        self._seed = check_int(seed, "seed", minimum=0)
        self._num_samples = (
            table.weights.size
            if num_samples is None
            else check_int(num_samples, "num_samples", minimum=1)
        )
        self._check_enough(table)
        self._table = table
        self._known: dict[str, WeightTable] = {table.digest: table}
        self._orders: weakref.WeakSet[_WithReplacement | _WithoutReplacement]
        self._orders = weakref.WeakSet()
        self._cache: tuple[int, str, IndexArray] | None = None

    def _check_enough(self, table: WeightTable) -> None:
        if not self._replacement and self._num_samples > table.nonzero:
            raise ConfigError(
                f"without replacement, num_samples ({self._num_samples}) cannot exceed the "
                f"number of positive weights ({table.nonzero}): lower num_samples or "
                "use replacement=True"
            )

    @property
    def source_len(self) -> int:
        return self._table.weights.size

    @property
    def seed(self) -> int:
        """The seed the draws come from."""
        return self._seed

    @property
    def replacement(self) -> bool:
        """Whether a record may be drawn more than once per epoch."""
        return self._replacement

    @property
    def weights(self) -> NDArray[np.float64]:
        """The current weights, read-only."""
        return self._table.weights

    def __len__(self) -> int:
        return self._num_samples

    def set_weights(self, weights: ArrayLike) -> None:
        """Replace the weights; safe to call while other threads take indices.

        With replacement, the new weights apply from the first position that no open
        cursor has taken yet (in a loader: the next batch not yet planned), and the
        cursors' states record the change there; without, from the next cursor opened.

        Errors:
            ConfigError: the same checks as the constructor's, or a different number
                of weights than the sampler was built with.
        """
        table = self._checked(weights)
        self._known[table.digest] = table
        self._table = table
        for order in list(self._orders):
            order.weights_changed(table)

    def register_weights(self, weights: ArrayLike) -> str:
        """Make ``weights`` known to :meth:`restore` by their digest, which it returns.

        Needed only in a new process, for states saved with more than
        ``INLINE_WEIGHTS`` weights (they name them by digest).

        Example:
            >>> import stoker as sk
            >>> len(sk.WeightedSampler([1, 1]).register_weights([1, 3]))
            16

        Errors:
            ConfigError: as for :meth:`set_weights`.
        """
        table = self._checked(weights)
        self._known[table.digest] = table
        return table.digest

    def _checked(self, weights: ArrayLike) -> WeightTable:
        table = weight_table(weights)
        if table.weights.size != self.source_len:
            raise ConfigError(
                f"set_weights needs {self.source_len} weights, one per record, "
                f"got {table.weights.size}"
            )
        self._check_enough(table)
        return table

    def _entry(self, table: WeightTable) -> Any:
        """How a state names ``table``: its weights, or its digest when they are many."""
        if table.weights.size <= self.INLINE_WEIGHTS:
            return table.weights.tolist()
        return table.digest

    def _resolve(self, entry: object) -> WeightTable:
        if isinstance(entry, str):
            table = self._known.get(entry)
            if table is None:
                raise StateError(
                    f"the state names weights of digest {entry!r} that {self!r} does not "
                    "know: call register_weights() (or set_weights()) with them, then restore"
                )
            return table
        if not isinstance(entry, list) or len(entry) != self.source_len:
            raise StateError(
                f"the state's weights must be {self.source_len} numbers or a digest, "
                f"got {str(entry)[:60]}: pass a state returned by state_dict(), unchanged"
            )
        try:
            table = self._checked(entry)
        except ConfigError as exc:
            raise StateError(f"the state's weights are invalid: {exc}") from None
        return self._known.setdefault(table.digest, table)

    def _changes(self, state: Mapping[str, Any]) -> list[tuple[int, WeightTable]]:
        changes = state["weight_changes"]
        ok = isinstance(changes, list) and bool(changes)
        previous = -1
        for c in changes if ok else []:
            if (
                not (isinstance(c, list) and len(c) == 2 and isinstance(c[0], int))
                or c[0] <= previous
            ):
                ok = False
            else:
                previous = c[0]
        if not ok:
            raise StateError(
                f"the state's weight_changes must be [[position, weights], ...] with "
                f"increasing positions, got {str(changes)[:80]}: pass a state returned "
                "by state_dict(), unchanged"
            )
        return [(int(at), self._resolve(entry)) for at, entry in changes]

    def _weighted_permutation(self, epoch: int, table: WeightTable) -> IndexArray:
        """Return epoch ``epoch``'s order without replacement under ``table``'s weights."""
        cached = self._cache
        if cached is not None and cached[0] == epoch and cached[1] == table.digest:
            return cached[2]
        u = 1.0 - epoch_rng(self._seed, epoch).random(table.weights.size)  # in (0, 1]
        keys = np.full(table.weights.size, -np.inf)
        positive = table.weights > 0
        keys[positive] = np.log(u[positive]) / table.weights[positive]
        order = np.argsort(-keys, kind="stable")[: self._num_samples].astype(np.int64)
        order.flags.writeable = False
        self._cache = (epoch, table.digest, order)
        return order

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "seed": self._seed, "replacement": self._replacement}

    def _check_state(self, state: object) -> Mapping[str, Any]:
        checked = super()._check_state(state)
        if "weight_changes" in checked:
            self._changes(checked)
            return checked
        saved = checked.get("weights")  # a state from before weight_changes: a digest
        current = self._table.digest
        if saved != current:
            raise StateError(
                f"the state was saved with weights of digest {saved!r}, but the current "
                f"weights of {self!r} have digest {current!r}: call set_weights() with the "
                "weights in effect when the state was saved, then restore"
            )
        return checked

    def restore(self, state: Mapping[str, Any]) -> SamplerCursor:
        checked = self._check_state(state)
        if "weight_changes" not in checked:
            return super().restore(checked)
        cursor = super().restore(checked)  # epoch and position checked
        epoch, position = cursor.epoch, cursor.position
        changes = self._changes(checked)
        if checked.get("weights_epoch") != epoch:  # a state that starts the next epoch
            changes = [(0, changes[-1][1])]
        self._table = changes[-1][1]  # the sampler goes on with the last weights
        order: EpochOrder
        if self._replacement:
            order = _WithReplacement(self, epoch, position, changes)
        else:
            order = _WithoutReplacement(self, epoch, changes[0][1])
        return IndexCursor(self, order, epoch, position)

    def _open(self, epoch: int, position: int) -> SamplerCursor:
        order: EpochOrder
        if self._replacement:
            order = _WithReplacement(self, epoch, position)
        else:
            order = _WithoutReplacement(self, epoch)
        return IndexCursor(self, order, epoch, position)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_orders", None)  # open cursors belong to this process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._orders = weakref.WeakSet()

    def __repr__(self) -> str:
        return (
            f"WeightedSampler(<{self.source_len} weights>, num_samples={self._num_samples}, "
            f"replacement={self._replacement}, seed={self._seed})"
        )
