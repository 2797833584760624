"""Stream sources: ``from_iterable`` and user-written ``IterDataset`` subclasses."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from .._context import Context
from .._hosts import Shard
from .._iterdataset import Cursor, IterDataset, StreamNode, state_count
from .._typing import is_marked, may_share
from ..errors import ConfigError, StateError

__all__ = [
    "CountingCursor",
    "FromIterable",
    "from_iterable",
    "open_user_stream",
    "user_next_pass_state",
]

T = TypeVar("T")
State = dict[str, Any]


def _json_problem(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, bool | int | float | str):
        return None
    if isinstance(value, list | tuple):
        items: Iterable[tuple[Any, Any]] = enumerate(value)
    elif isinstance(value, dict):
        items = value.items()
    else:
        return f"{where} is a {type(value).__name__}"
    for key, item in items:
        if isinstance(value, dict) and not isinstance(key, str):
            return f"{where} has the non-string key {key!r}"
        problem = _json_problem(item, f"{where}[{key!r}]")
        if problem:
            return problem
    return None


class CountingCursor(Cursor[T]):
    """Reads ``make()``; its state counts the records handed out (``{"steps": n}``).

    Resuming re-creates the iterable and skips ``n`` records, which is exact when
    ``make()`` yields the same records every time.
    """

    def __init__(self, make: Callable[[], Iterable[T]], steps: int, what: str) -> None:
        self._make, self._steps, self._what = make, steps, what
        self._it: Iterator[T] | None = None

    def _start(self) -> Iterator[T]:
        it = iter(self._make())
        skipped = sum(1 for _ in itertools.islice(it, self._steps))
        if skipped < self._steps:
            raise StateError(
                f"the state of {self._what} says {self._steps} records were read, but the "
                f"stream now ends after {skipped}: resuming needs a stream that yields the "
                "same records every time"
            )
        self._it = it
        return it

    def __next__(self) -> T:
        record = next(self._it if self._it is not None else self._start())
        self._steps += 1
        return record

    def state_dict(self) -> State:
        return {"steps": self._steps}


class _UserStateCursor(Cursor[T]):
    """Reads a user ``IterDataset`` that implements ``state_dict``/``load_state_dict``.

    Read whole, its state is the dataset's own. As part ``index`` of ``count`` (a
    stream read whole by every worker, each keeping every ``count``-th record), it is
    ``{"kept": k, "own": ...}``: the records kept and the dataset's state right after
    the last of them, from which the next kept record is ``count - 1`` records on.
    """

    def __init__(self, ds: IterDataset[T], state: State | None, part: Shard | None) -> None:
        self._ds, self._part = ds, part
        self._kept = 0
        if part is not None:
            self._kept = state_count(state, "kept", type(ds).__name__)
            state = None if state is None else state.get("own")
        self._state = state
        self._it: Iterator[T] | None = None

    def _start(self) -> Iterator[T]:
        if self._state is not None:
            self._ds.load_state_dict(self._state)
        it: Iterator[T] = iter(self._ds)
        part = self._part
        if part is not None:
            skip = part.index if self._kept == 0 else part.count - 1
            it = itertools.islice(it, skip, None, part.count)
        self._it = it
        return it

    def __next__(self) -> T:
        record = next(self._it if self._it is not None else self._start())
        self._kept += 1
        return record

    def state_dict(self) -> State:
        if self._it is None:
            self._start()
        state = self._ds.state_dict()
        problem = _json_problem(state, "state")
        if problem is not None or not isinstance(state, dict):
            raise TypeError(
                f"{type(self._ds).__name__}.state_dict() must return a dict of JSON types "
                f"(dict, list, str, int, float, bool, None), but {problem or 'it is not a dict'}"
            )
        if self._part is not None:
            return {"kept": self._kept, "own": state}
        return state


def _has_state(ds: IterDataset[Any]) -> bool:
    cls = type(ds)
    return (
        cls.state_dict is not IterDataset.state_dict
        and cls.load_state_dict is not IterDataset.load_state_dict
    )


def _several(ds: IterDataset[Any], shard: Shard | None) -> Shard | None:
    """``shard`` when ``ds`` is read whole by each of several readers, else None."""
    if shard is not None and shard.count > 1 and not ds.shards_itself:
        return shard
    return None


def open_user_stream(
    ds: IterDataset[T], state: State | None, shard: Shard | None = None
) -> Cursor[T]:
    """Open a user-written ``IterDataset`` at ``state`` (None: the beginning).

    With ``state_dict``/``load_state_dict`` overridden, the state is the dataset's
    own (nothing is read again to resume); otherwise it is ``{"steps": n}`` and
    resuming reads ``n`` records again. Given a ``shard`` of several parts, a
    dataset that does not declare ``shards_itself`` is read whole and every
    ``count``-th record is kept.
    """
    cls = type(ds)
    part = _several(ds, shard)
    if _has_state(ds):
        return _UserStateCursor(ds, state, part)
    if part is not None:
        return CountingCursor(
            lambda: itertools.islice(iter(ds), part.index, None, part.count),
            state_count(state, "steps", cls.__name__),
            f"{cls.__name__} (part {part.index} of {part.count})",
        )
    return CountingCursor(ds.__iter__, state_count(state, "steps", cls.__name__), cls.__name__)


def user_next_pass_state(ds: IterDataset[Any], end: State | None, shard: Shard) -> State | None:
    """The state that opens the next pass of a user's ``IterDataset`` read as ``shard``,
    after a pass that ended at ``end``: its own state, for a dataset that has one (the
    state it ended with is where its next iterator starts, as in an uninterrupted
    run), else None (a fresh start).
    """
    if end is None or not _has_state(ds):
        return None
    if _several(ds, shard) is not None:
        return {"kept": 0, "own": end.get("own")}
    return end


def _accepts(factory: Callable[..., Any], name: str) -> bool:
    try:
        parameter = inspect.signature(factory).parameters.get(name)
    except (TypeError, ValueError):  # some builtins have no signature
        return False
    return parameter is not None and parameter.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


class FromIterable(StreamNode[T]):
    """A stream read from ``factory()``; built by :func:`from_iterable`.

    Example:
        >>> import stoker as sk
        >>> list(sk.from_iterable(lambda: "abc"))
        ['a', 'b', 'c']

    Errors:
        ConfigError: ``factory`` is not callable.
        StateError: a state to resume from with more records than the stream now has.
    """

    def __init__(self, factory: Callable[..., Iterable[T]]) -> None:
        if not callable(factory):
            raise ConfigError(
                "from_iterable() needs a function that returns an iterable (it is called "
                f"once per pass), got {type(factory).__name__}: pass lambda: records, or "
                "use sk.from_sequence(records) for indexable data"
            )
        self._factory = factory
        self._takes_shard = _accepts(factory, "shard")
        self._takes_epoch = _accepts(factory, "epoch")

    @property
    def releases_gil(self) -> bool:
        return is_marked(self._factory)

    @property
    def shares_process(self) -> bool:
        return may_share(self._factory)

    def _read(self, shard: Shard, epoch: int) -> Iterable[T]:
        kwargs: dict[str, Any] = {"epoch": epoch} if self._takes_epoch else {}
        if self._takes_shard:
            return self._factory(shard=shard, **kwargs)
        records = self._factory(**kwargs)
        if shard.count == 1:
            return records
        return itertools.islice(records, shard.index, None, shard.count)

    def _open(self, ctx: Context, state: State | None) -> Cursor[T]:
        steps = state_count(state, "steps", "from_iterable")
        shard, epoch = ctx.shard, ctx.epoch
        return CountingCursor(lambda: self._read(shard, epoch), steps, "from_iterable")

    def __repr__(self) -> str:
        return f"FromIterable({getattr(self._factory, '__qualname__', self._factory)!r})"


def from_iterable(factory: Callable[..., Iterable[T]]) -> FromIterable[T]:
    """A stream whose records come from ``factory()``, called once per pass.

    If ``factory`` has a ``shard`` parameter, it is called as ``factory(shard=s)``
    with an :class:`~stoker.Shard` and should yield only that part (for example
    every ``s.count``-th file starting at ``s.index``). Otherwise every reader calls
    ``factory()`` and keeps every ``s.count``-th record starting at ``s.index``.
    If it has an ``epoch`` parameter, it also gets ``epoch=`` (the loader's epoch),
    so that it can change its order every epoch (say, shuffle its files with
    ``np.random.default_rng((seed, epoch))``).

    The state is the number of records handed out; resuming calls ``factory`` again
    (with the same shard and epoch) and skips that many, so ``factory`` must yield
    the same records every time it is called with the same arguments.

    Args:
        factory: a function returning an iterable of records (a generator
            function, ``lambda: open(path)``, ...).

    Returns:
        A :class:`FromIterable` stream.

    Example:
        >>> import stoker as sk
        >>> def numbers(shard=sk.Shard(0, 1)):
        ...     return range(shard.index, 10, shard.count)
        >>> list(sk.from_iterable(numbers).map(lambda x: x * x))[:4]
        [0, 1, 4, 9]
        >>> def per_epoch(epoch=0):
        ...     return [epoch] * 2
        >>> loader = sk.DataLoader(sk.from_iterable(per_epoch), batch_size=None)
        >>> [list(loader), list(loader)]
        [[0, 0], [1, 1]]

    Errors:
        ConfigError: ``factory`` is not callable (an iterable itself is not enough:
            it could be read only once).
    """
    return FromIterable(factory)
