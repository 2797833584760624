"""``EpochStateful``: PyTorch's and torchdata's stateful protocol, written once.

Samplers and batch samplers open each epoch as a cursor. Code written for
``torch.utils.data`` instead calls ``set_epoch(e)``, ``iter(obj)``, ``state_dict()``
and ``load_state_dict(state)`` on the object itself; this mixin maps those calls onto
cursors:

* ``set_epoch(e)`` chooses the epoch that ``iter`` walks (0 until set), and drops a
  loaded state of another epoch;
* ``load_state_dict(state)`` checks ``state`` at once and makes the next ``iter``
  resume there (once);
* ``state_dict()`` is the state of the cursor that ``iter`` opened most recently
  (before any ``iter``: the loaded state, else the start of the chosen epoch).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

from ..errors import ConfigError

__all__ = ["EpochStateful"]


class _Cursor(Protocol):
    @property
    def epoch(self) -> int: ...

    def state_dict(self) -> dict[str, Any]: ...


C = TypeVar("C", bound=_Cursor)


class EpochStateful(abc.ABC, Generic[C]):
    """Mixin: the stateful protocol over cursors of type ``C`` (see the module doc)."""

    _epoch: int = 0
    _pending: dict[str, Any] | None = None
    _last: C | None = None

    @abc.abstractmethod
    def _start_cursor(self, epoch: int) -> C:
        """A cursor at the start of ``epoch``."""

    @abc.abstractmethod
    def _resume_cursor(self, state: Mapping[str, Any]) -> C:
        """A cursor at ``state``, after checking it (StateError)."""

    def _start_state(self, epoch: int) -> dict[str, Any]:
        """The state at the start of ``epoch``; override when a cheaper way exists."""
        return self._start_cursor(epoch).state_dict()

    def _loaded_epoch(self, state: Mapping[str, Any]) -> int:
        """Check ``state`` for ``load_state_dict`` and return its epoch."""
        return self._resume_cursor(state).epoch

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch that the next ``iter(self)`` walks.

        Errors:
            ConfigError: ``epoch`` is not an int >= 0.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ConfigError(f"epoch must be an int >= 0, got {epoch!r}")
        if self._pending is not None and self._pending["epoch"] != epoch:
            self._pending = None
        if epoch != self._epoch:
            self._last = None
        self._epoch = epoch

    def _next_cursor(self) -> C:
        """The cursor ``iter(self)`` walks: at a loaded state, else at the epoch's start."""
        pending, self._pending = self._pending, None
        if pending is not None:
            cursor = self._resume_cursor(pending)
        else:
            cursor = self._start_cursor(self._epoch)
        self._last = cursor
        return cursor

    def state_dict(self) -> dict[str, Any]:
        """Return the state of the cursor most recently opened by ``iter(self)``.

        Before any ``iter``, this is the loaded state, or the start of the epoch given
        to ``set_epoch``.
        """
        if self._pending is not None:
            return dict(self._pending)
        if self._last is not None:
            return self._last.state_dict()
        return self._start_state(self._epoch)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Make the next ``iter(self)`` resume at ``state``.

        Errors:
            StateError: a state that does not fit; checked now, not at ``iter``.
        """
        self._epoch = self._loaded_epoch(state)
        self._pending = dict(state)
        self._last = None

    def __getstate__(self) -> dict[str, Any]:
        # An open cursor may hold a live iterator: it stays behind in a pickle.
        state = dict(self.__dict__)
        state.pop("_last", None)
        return state
