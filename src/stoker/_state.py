"""Saved states <-> JSON: the loader state's schema, versioned, validated, never unpickled.

A state is a small dict of JSON types. It repeats the settings that decide what comes
next (a loader's seed, dataset length, batch size; a sampler's kind, length, seed);
restoring it into an object whose settings differ is refused with a
:class:`StateError` that names the field, instead of silently going on with other
data. This module holds the loader state's schema (:data:`SCHEMA`, the key names
every other module uses, and the few functions that build and read a state) and the
checks that every stateful part of stoker uses.

The loader state, format ``stoker.loader/1``::

    {"format", "kind", "seed", ...settings}   the header (loader_header)
    "epoch", "batches"                        the epoch and the batches handed out in it
    "ahead": [k, ...]                         batches after "batches" already handed out
                                              (ordered=False); absent when none
    "carry": [[epoch, index], ...]            map: records carried into the epoch (rollover)
    "sampler": {...}                          map: the sampler's own state
    "stream": None | {...}                    stream: the reader's state, or with workers
                                              {"parts", "states", "next", "ended"}
                                              (elastic streams add "elastic", "hosts")
    "torch": {...}                            the torch drop-in's own fields

Every stage keeps its own state below its key (a sampler's under "sampler", a
stream's under "stream"); only the loader's fields are named here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._hosts import Shard
from .errors import StateError

if TYPE_CHECKING:
    from ._config import LoaderConfig

__all__ = [
    "AHEAD",
    "BATCHES",
    "CARRY",
    "ELASTIC",
    "ENDED",
    "EPOCH",
    "FORMAT",
    "HELD",
    "HOST",
    "HOSTS",
    "KIND",
    "NEXT",
    "NEXT_PASS",
    "PARTS",
    "SAMPLER",
    "SCHEMA",
    "STATES",
    "STREAM",
    "TORCH",
    "Field",
    "ahead_of",
    "check_fields",
    "check_state",
    "continued",
    "loader_header",
    "parts_state",
    "position_state",
    "state_int",
    "with_ahead",
]

FORMAT = "stoker.loader/1"

# The loader state's keys (see the module doc).
KIND = "kind"
EPOCH = "epoch"
BATCHES = "batches"
AHEAD = "ahead"
CARRY = "carry"
SAMPLER = "sampler"
STREAM = "stream"
HOST = "host"
TORCH = "torch"
# The keys of a stream state read by workers (``"stream"`` with workers).
PARTS, STATES, NEXT, ENDED, ELASTIC, HOSTS = "parts", "states", "next", "ended", "elastic", "hosts"
# A stream state carried from the end of a pass into the next (``"stream"`` of a
# state that starts an epoch): the readers' states for a stream that keeps state of
# its own across passes (see ``IterDataset._next_pass_state``).
NEXT_PASS = "next_pass"
HELD = "held"


@dataclass(frozen=True)
class Field:
    """One field of a loader state after its header: the kinds of state that must
    hold it (``required``), and what it means."""

    key: str
    required: tuple[str, ...]
    meaning: str


SCHEMA: tuple[Field, ...] = (
    Field(EPOCH, ("map", "batch_sampler", "stream"), "the epoch"),
    Field(BATCHES, ("map", "batch_sampler", "stream"), "batches handed out in the epoch"),
    Field(AHEAD, (), "batch numbers after 'batches' already handed out (ordered=False)"),
    Field(CARRY, ("map",), "[epoch, index] pairs carried into the epoch"),
    Field(SAMPLER, ("map",), "the sampler's own state"),
    Field(STREAM, ("stream",), "the stream's state (None: not read yet)"),
    Field(TORCH, (), "the torch drop-in's own fields"),
)
"""The loader state's fields after the header; :func:`check_state` checks them."""


def position_state(
    header: Mapping[str, Any], epoch: int, batches: int, **fields: Any
) -> dict[str, Any]:
    """A loader state: ``header``, the position (``epoch``, ``batches``) and a plan's
    own ``fields`` (``carry`` and ``sampler``, or ``stream``).

    Example:
        >>> position_state({"format": FORMAT, "kind": "stream"}, 1, 2, stream=None)
        {'format': 'stoker.loader/1', 'kind': 'stream', 'epoch': 1, 'batches': 2, 'stream': None}
    """
    return {**header, EPOCH: epoch, BATCHES: batches, **fields}


def ahead_of(state: Mapping[str, Any] | None) -> list[int]:
    """The batches after ``state["batches"]`` that were already handed out.

    Example:
        >>> ahead_of({"batches": 3, "ahead": [5]}), ahead_of(None)
        ([5], [])
    """
    return [] if state is None else list(state.get(AHEAD, []))


def with_ahead(state: dict[str, Any], ahead: Sequence[int]) -> dict[str, Any]:
    """``state`` with the batches handed out ahead of it (the same state when none).

    Example:
        >>> with_ahead({"batches": 3}, [5])
        {'batches': 3, 'ahead': [5]}
    """
    return {**state, AHEAD: list(ahead)} if ahead else state


def continued(state: dict[str, Any]) -> dict[str, Any]:
    """``state``, saved at the end of a pass, as the same loader's next pass starts
    from it: the readers that ended the pass still hold the stream states carried for
    a restore (``HELD``), so they report them but do not load them again.

    Example:
        >>> continued({"epoch": 1, "stream": {"next_pass": {"i": 0}}})
        {'epoch': 1, 'stream': {'next_pass': {'i': 0}, 'held': True}}
    """
    stream = state.get(STREAM)
    if isinstance(stream, Mapping) and NEXT_PASS in stream:
        return {**state, STREAM: {NEXT_PASS: stream[NEXT_PASS], HELD: True}}
    return state


def parts_state(
    states: Sequence[Any],
    next_part: int,
    ended: Sequence[bool],
    hosts: Shard | None = None,
) -> dict[str, Any]:
    """The ``"stream"`` entry of a stream read by ``len(states)`` workers (``hosts``:
    an elastic stream's, which names the host layout).

    Example:
        >>> parts_state([None, None], 0, [False, False])
        {'parts': 2, 'states': [None, None], 'next': 0, 'ended': [False, False]}
    """
    entry: dict[str, Any] = {} if hosts is None else {ELASTIC: 1, HOSTS: [hosts.index, hosts.count]}
    entry.update({PARTS: len(states), STATES: list(states), NEXT: next_part, ENDED: list(ended)})
    return entry


_LOADER_HINTS = {
    "seed": "pass the same seed=",
    "dataset_len": "the dataset changed size since the state was saved",
    "batch_size": "pass the same batch_size= (with shard=, keep batch_size times the host "
    "count the same)",
    "host": "a stream's state belongs to one host: restore it on the host with the same "
    "shard index and count",
    "last_batch": "pass the same last_batch=",
    "shuffle": "pass the same shuffle=",
}

_REQUIRED = {
    kind: tuple(f.key for f in SCHEMA if kind in f.required)
    for kind in ("map", "batch_sampler", "stream")
}


def check_fields(
    state: object,
    expected: Mapping[str, Any],
    owner: object,
    hints: Mapping[str, str] | None = None,
) -> Mapping[str, Any]:
    """Check that ``state`` is a mapping whose fields equal ``expected``.

    ``expected`` holds ``"kind"`` first, so a state from another kind of object is
    named as such before any of its parameters are compared. ``hints`` add, per
    field, how to fix a mismatch.

    Example:
        >>> check_fields({"kind": "A", "n": 3}, {"kind": "A", "n": 3}, "a")["n"]
        3

    Errors:
        StateError: ``state`` is not a mapping, or a field is missing or differs.
    """
    if not isinstance(state, Mapping):
        raise StateError(
            f"a state must be a dict as returned by state_dict(), got {type(state).__name__}"
        )
    kind = expected.get("kind")
    if kind is not None and state.get("kind") != kind:
        raise StateError(
            f"the state was saved by {state.get('kind')!r}, not by a {kind}: "
            f"restore it into the kind of object that saved it"
        )
    for key, value in expected.items():
        if key not in state:
            raise StateError(f"the state has no {key!r} field, so {owner} cannot restore it")
        if state[key] != value:
            hint = (hints or {}).get(
                key,
                "restore into an object built with the same arguments as the one that "
                "saved the state",
            )
            raise StateError(
                f"the state was saved with {key}={state[key]!r}, but {owner} has "
                f"{key}={value!r}; refusing to go on with other data ({hint})"
            )
    return state


def state_int(state: Mapping[str, Any], key: str, owner: object) -> int:
    """Read a non-negative int field of a saved state.

    Errors:
        StateError: the field is missing or is not a non-negative int.
    """
    if key not in state:
        raise StateError(f"the state has no {key!r} field, so {owner} cannot restore it")
    value = state[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StateError(
            f"the state's {key!r} must be an int >= 0, got {value!r}: "
            "pass a state returned by state_dict(), unchanged"
        )
    return value


def check_state(state: object, header: Mapping[str, Any], sampler: Any = None) -> dict[str, Any]:
    """Validate a loader ``state`` against the loader's ``header``; return a clean copy.

    The nested entries are checked too: a map-style state's ``carry`` (records
    carried into the epoch), the batches handed out ``ahead``, and, given the
    loader's ``sampler``, the sampler's own state.

    Example:
        >>> check_state({"format": FORMAT, "kind": "batch_sampler", "seed": 0,
        ...              "epoch": 1, "batches": 2}, {"format": FORMAT, "seed": 0,
        ...              "kind": "batch_sampler"})["batches"]
        2

    Errors:
        StateError: not a stoker state, another format version, a field that
            differs from this loader's settings, or missing fields.
    """
    if not isinstance(state, Mapping) or state.get("format") != FORMAT:
        got = state.get("format") if isinstance(state, Mapping) else type(state).__name__
        raise StateError(
            f"not a stoker loader state of format {FORMAT!r} (got {got!r}): pass what "
            "it.state_dict() or loader.state_dict() returned"
        )
    expected = {KIND: header[KIND], **header}
    stream = state.get(STREAM)
    if isinstance(stream, Mapping) and stream.get(ELASTIC) == 1:
        # An elastic stream's state names its hosts itself and re-deals its shards to
        # another host count (see _elastic.py); the plan checks the layout.
        expected.pop(HOST, None)
    check_fields(state, expected, "this loader", _LOADER_HINTS)
    missing = [k for k in _REQUIRED[header[KIND]] if k not in state]
    if missing:
        raise StateError(f"the state lacks the fields {missing}: it is damaged or hand-made")
    epoch = state_int(state, EPOCH, "this loader")
    state_int(state, BATCHES, "this loader")
    _check_ahead(state.get(AHEAD, []))
    if header[KIND] == "map":
        _check_carry(state[CARRY], epoch, header["dataset_len"])
        if sampler is not None:
            _check_sampler(state[SAMPLER], sampler, epoch)
    try:
        clean: dict[str, Any] = json.loads(json.dumps(state))
    except (TypeError, ValueError) as exc:
        raise StateError(f"a loader state holds only JSON types: {exc}") from exc
    return clean


_DAMAGED = "pass a state returned by state_dict(), unchanged"


def _is_index(value: object, stop: int | None = None) -> bool:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return ok and (stop is None or value < stop)  # type: ignore[operator]


def _check_ahead(ahead: object) -> None:
    if not isinstance(ahead, list) or not all(_is_index(s) for s in ahead):
        raise StateError(
            f"the state's 'ahead' must be a list of batch numbers >= 0, got {ahead!r}: " + _DAMAGED
        )


def _check_carry(carry: object, epoch: int, dataset_len: int) -> None:
    """``carry``: [epoch, index] pairs of records carried into ``epoch``."""
    if not isinstance(carry, list):
        raise StateError(f"the state's 'carry' must be a list, got {carry!r}: " + _DAMAGED)
    for pair in carry:
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and _is_index(pair[0], epoch + 1)
            and _is_index(pair[1], dataset_len)
        ):
            raise StateError(
                f"the state's 'carry' holds {pair!r}, not an [epoch, index] pair with an "
                f"epoch <= {epoch} and an index below the dataset length {dataset_len}: " + _DAMAGED
            )


def _check_sampler(entry: object, sampler: Any, epoch: int) -> None:
    """The sampler's own state: its kind and arguments, epoch and position."""
    if not isinstance(entry, Mapping):
        raise StateError(
            f"the state's 'sampler' must be the dict a sampler's state_dict() returns, "
            f"got {type(entry).__name__}: " + _DAMAGED
        )
    at = sampler._loaded_epoch(entry)  # StateError for another kind, arguments, epoch
    if at != epoch:
        raise StateError(
            f"the state is inconsistent: the loader is at epoch {epoch} but its sampler "
            f"at epoch {at}: " + _DAMAGED
        )
    position = state_int(entry, "position", sampler)
    if sampler._has_len() and position > len(sampler):
        raise StateError(
            f"the state's sampler position {position} is past the end of {sampler!r}, "
            f"which has {len(sampler)} indices per epoch: " + _DAMAGED
        )


def loader_header(cfg: LoaderConfig, dataset_len: int | None, hosts: Shard) -> dict[str, Any]:
    """The settings a loader's state repeats (``dataset_len`` None: a stream).

    A map-style state holds the global batch size (``batch_size`` times the host
    count), so it resumes on any host count with the same global batch; a stream's
    position belongs to its host, so a sharded stream state names the host.
    """
    if dataset_len is None:
        header: dict[str, Any] = {
            "format": FORMAT,
            "kind": "stream",
            "seed": cfg.seed,
            "batch_size": cfg.batch_size,
            "last_batch": cfg.last_batch,
        }
        if hosts.count > 1:
            header[HOST] = [hosts.index, hosts.count]
        return header
    if cfg.batch_sampler is not None:
        return {
            "format": FORMAT,
            "kind": "batch_sampler",
            "seed": cfg.seed,
            "dataset_len": dataset_len,
        }
    return {
        "format": FORMAT,
        "kind": "map",
        "seed": cfg.seed,
        "dataset_len": dataset_len,
        "batch_size": None if cfg.batch_size is None else cfg.batch_size * hosts.count,
        "last_batch": cfg.last_batch,
        "shuffle": cfg.shuffle,
    }
