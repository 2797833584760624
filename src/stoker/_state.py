"""Saved states <-> JSON: versioned, validated, never unpickled.

A state is a small dict of JSON types. It repeats the settings that decide what comes
next (a loader's seed, dataset length, batch size; a sampler's kind, length, seed);
restoring it into an object whose settings differ is refused with a
:class:`StateError` that names the field, instead of silently going on with other
data. This module holds the checks that every stateful part of stoker uses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._hosts import Shard
from .errors import StateError

if TYPE_CHECKING:
    from ._config import LoaderConfig

__all__ = ["FORMAT", "check_fields", "check_state", "loader_header", "state_int"]

FORMAT = "stoker.loader/1"

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
    "map": ("epoch", "batches", "carry", "sampler"),
    "batch_sampler": ("epoch", "batches"),
    "stream": ("epoch", "batches", "stream"),
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
    expected = {"kind": header["kind"], **header}
    stream = state.get("stream")
    if isinstance(stream, Mapping) and stream.get("elastic") == 1:
        # An elastic stream's state names its hosts itself and re-deals its shards to
        # another host count (see _elastic.py); the plan checks the layout.
        expected.pop("host", None)
    check_fields(state, expected, "this loader", _LOADER_HINTS)
    missing = [k for k in _REQUIRED[header["kind"]] if k not in state]
    if missing:
        raise StateError(f"the state lacks the fields {missing}: it is damaged or hand-made")
    epoch = state_int(state, "epoch", "this loader")
    state_int(state, "batches", "this loader")
    _check_ahead(state.get("ahead", []))
    if header["kind"] == "map":
        _check_carry(state["carry"], epoch, header["dataset_len"])
        if sampler is not None:
            _check_sampler(state["sampler"], sampler, epoch)
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
            header["host"] = [hosts.index, hosts.count]
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
