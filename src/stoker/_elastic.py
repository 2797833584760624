"""Elastic stream states: resume a stream under another ``num_workers`` or host count.

A stream is read by ``P = hosts x parts`` readers; reader ``h * n + k`` (worker ``k``
of ``n`` on host ``h``) opens it with ``Shard(h * n + k, P)``. An elastic stream
(``stream.elastic``: tar shards, and ``map``/``filter``/``batch``/``shuffle`` over
them) keeps its state per unit of data (a shard and the samples taken from it; a
shuffle's partly emitted window), so the readers' states can be dealt anew:

* same host layout and ``num_workers``: every reader continues exactly (the
  batches after the restore are those of the uninterrupted run);
* another ``num_workers`` on the same hosts: the host's unfinished shards, with
  their offsets, are dealt to its new readers;
* another host count: every host's state is needed. Gather them and pass
  ``sk.merge_host_states(states)`` to every new host; a state saved on one host
  resumes on any host count as it is.

No record is lost or repeated in any case. The loader's stream state of an elastic
stream is ``{"elastic": 1, "hosts": [h, H], "parts": n, "states": [...], "next": k,
"ended": [...]}`` (``parts`` is 1 without workers); other streams keep their own
format and resume only under the same ``num_workers`` (:func:`worker_count_error`
says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._hosts import Shard
from ._iterdataset import IterDataset, StreamNode
from ._state import (
    AHEAD,
    BATCHES,
    ELASTIC,
    ENDED,
    EPOCH,
    HOST,
    HOSTS,
    KIND,
    NEXT,
    PARTS,
    STATES,
    STREAM,
    parts_state,
    position_state,
)
from .errors import StateError

__all__ = [
    "elastic_dataset",
    "elastic_state",
    "fresh_state",
    "is_elastic_state",
    "merge_host_states",
    "restore_elastic",
    "worker_count_error",
]

State = dict[str, Any]
Parts = tuple[list[State | None], int, list[bool]]


def elastic_dataset(dataset: object) -> StreamNode[Any] | None:
    """``dataset`` as an elastic stream, or None when it is not one."""
    return dataset if isinstance(dataset, StreamNode) and dataset.elastic else None


ELASTIC_STREAMS = (
    "from_tar_shards, with map, filter, batch and shuffle(window) over it (shuffle_shards=True too)"
)
"""The streams that resume under any ``num_workers`` and host count (for messages)."""


def _workers(count: int) -> str:
    return f"num_workers={count}" if count else "num_workers=0 (no workers)"


def worker_count_error(saved: int, now: int, dataset: object) -> StateError:
    """The error for a state of a stream that is not elastic, saved by a loader with
    ``saved`` workers (0: none) and restored into one with ``now``."""
    source = dataset
    while isinstance(getattr(source, "_parent", None), IterDataset):
        source = source._parent  # type: ignore[attr-defined]
    return StateError(
        f"this stream state was saved with {_workers(saved)} and this loader has "
        f"{_workers(now)}: a stream read from {type(source).__name__} is not elastic, its state "
        f"holds each worker's own position, so it resumes only with the same worker "
        f"count and hosts. Build the loader with num_workers={saved} to resume it (the "
        f"worker_mode may differ). Streams that resume under any num_workers and host "
        f"count: {ELASTIC_STREAMS}"
    )


def is_elastic_state(state: Any) -> bool:
    """True for a loader state whose stream part is an elastic stream's."""
    stream = state.get(STREAM) if isinstance(state, dict) else None
    return isinstance(stream, dict) and stream.get(ELASTIC) == 1


def _readers(hosts: Shard, parts: int) -> list[Shard]:
    return [Shard(hosts.index * parts + k, hosts.count * parts) for k in range(parts)]


def elastic_state(
    hosts: Shard, states: Sequence[State | None], next_part: int, ended: Sequence[bool]
) -> State:
    """The loader's stream state of an elastic stream read by ``len(states)`` readers."""
    return parts_state(states, next_part, ended, hosts)


def _check(stream: Any) -> tuple[Shard, int]:
    ok = (
        isinstance(stream, dict)
        and stream.get(ELASTIC) == 1
        and isinstance(stream.get(HOSTS), list)
        and len(stream[HOSTS]) == 2
        and isinstance(stream.get(PARTS), int)
        and stream[PARTS] >= 1
        and isinstance(stream.get(STATES), list)
        and len(stream[STATES]) == stream[PARTS]
        and isinstance(stream.get(ENDED), list)
        and len(stream[ENDED]) == stream[PARTS]
        and isinstance(stream.get(NEXT), int)
    )
    if not ok:
        raise StateError(
            "this stream is elastic, but the state's stream part is not an elastic stream "
            "state: pass a state saved by a loader over the same stream, unchanged"
        )
    index, count = stream[HOSTS]
    return Shard(int(index), int(count)), int(stream[PARTS])


def fresh_state(hosts: Shard, parts: int) -> State:
    """The stream state of readers that have read nothing yet (it fits any layout)."""
    return elastic_state(hosts, [None] * parts, 0, [False] * parts)


def restore_elastic(dataset: StreamNode[Any], stream: Any, hosts: Shard, parts: int) -> Parts:
    """Each of this host's ``parts`` readers' states, the next reader and which ended.

    A reader that ended has handed out all its records and takes no part in a new
    deal; a state in which no reader has read anything starts afresh on any layout.

    Errors:
        StateError: a damaged state, or one saved on one of several hosts restored
            under another host count (merge the hosts' states first).
    """
    if stream is None:
        return [None] * parts, 0, [False] * parts
    saved_hosts, saved_parts = _check(stream)
    states: list[State | None] = list(stream[STATES])
    ended = [bool(e) for e in stream[ENDED]]
    if saved_hosts == hosts and saved_parts == parts:
        return states, int(stream[NEXT]) % parts, ended
    if all(s is None for s in states) and not any(ended):
        return [None] * parts, 0, [False] * parts
    if saved_hosts.count == hosts.count:
        if saved_hosts.index != hosts.index:
            raise StateError(
                f"this stream state belongs to host {saved_hosts.index} of {hosts.count}: "
                f"restore it on that host, or merge every host's state with "
                "sk.merge_host_states(states) and restore the result on any host"
            )
        new = [Shard(k, parts) for k in range(parts)]  # deal this host's shards anew
    elif saved_hosts.count == 1:
        new = _readers(hosts, parts)  # deal all shards over every host's readers
    else:
        raise StateError(
            f"this stream state was saved on host {saved_hosts.index} of "
            f"{saved_hosts.count} and holds only that host's shards; to resume on "
            f"{hosts.count} host(s), gather the states of all {saved_hosts.count} hosts "
            "and restore sk.merge_host_states(states) on every new host"
        )
    readers = _readers(saved_hosts, saved_parts)
    old = [(r, s) for r, s, e in zip(readers, states, ended, strict=True) if not e]
    return [dataset._deal_state(old, shard) for shard in new], 0, [False] * parts


def _same_run(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The settings every state repeats; StateError when they differ."""
    header = {k: v for k, v in states[0].items() if k not in _OWN}
    for state in states:
        if {k: v for k, v in state.items() if k not in _OWN} != header:
            raise StateError(
                "these states come from loaders with other settings: pass the states that "
                "the hosts of one run saved after the same step"
            )
    return header


_OWN = (HOST, STREAM, BATCHES, EPOCH, AHEAD)


def merge_host_states(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One loader state from the states that every host saved after the same step.

    A map-style loader's state is the same on every host and is returned as it is.
    An elastic stream's hosts each hold their own shards' positions: the merged
    state holds them all and resumes on any host count and ``num_workers``. A host
    whose stream already ended (its state starts the next epoch) counts as done.

    Args:
        states: ``it.state_dict()`` of every host, in any order (one per host).

    Returns:
        A loader state to restore on every new host.

    Example:
        >>> import stoker as sk
        >>> state = sk.DataLoader(sk.range(0, 8), batch_size=2).state_dict()
        >>> sk.merge_host_states([state, state]) == state
        True

    Errors:
        StateError: states of different loaders or epochs, a host missing or twice,
            or a stream that is not elastic.
    """
    states = list(states)
    if not states or not all(isinstance(s, dict) for s in states):
        raise StateError("merge_host_states() needs the state (a dict) of every host")
    first = states[0]
    if first.get(KIND) != "stream" or HOST not in first:
        if any(s != first for s in states):
            raise StateError(
                "these states differ, and they are not those of an elastic stream's hosts: "
                "pass states saved by every host after the same step (a map-style loader's "
                "are then equal)"
            )
        return first
    header = _same_run(states)
    hosts = [s.get(HOST) for s in states]
    count = len(states)
    if sorted(tuple(h) for h in hosts if isinstance(h, list)) != [(i, count) for i in range(count)]:
        raise StateError(
            f"merge_host_states() needs the state of each host once; got hosts {hosts} in "
            f"{count} states"
        )
    streams = [s.get(STREAM) for s in states]
    if not all(s is None or (isinstance(s, dict) and s.get(ELASTIC) == 1) for s in streams):
        raise StateError(
            "this stream is not elastic: its state resumes only on the same host with the "
            f"same num_workers, so the hosts' states cannot be merged (elastic streams: "
            f"{ELASTIC_STREAMS})"
        )
    epoch = min(int(s[EPOCH]) for s in states)
    layouts = [_check(s)[1] for s in streams if s is not None]
    parts = layouts[0] if layouts else 1
    merged: list[State | None] = []
    ended: list[bool] = []
    for state in sorted(states, key=lambda s: int(s[HOST][0])):
        stream = state.get(STREAM)
        if int(state[EPOCH]) == epoch and stream is not None:
            if _check(stream)[1] != parts:
                raise StateError("these states come from loaders with other num_workers")
            merged.extend(stream[STATES])
            ended.extend(bool(e) for e in stream[ENDED])
            continue
        fresh = stream is None or (
            all(x is None for x in stream[STATES]) and not any(stream[ENDED])
        )
        if int(state[EPOCH]) != epoch + 1 or not fresh:
            if int(state[EPOCH]) == epoch:  # loader.state_dict() before reading
                merged.extend([None] * parts)
                ended.extend([False] * parts)
                continue
            raise StateError(
                "these states come from different epochs: pass the states that the hosts "
                "saved after the same step"
            )
        merged.extend([None] * parts)  # this host's stream ended: all its shards are read
        ended.extend([True] * parts)
    batches = max(int(s[BATCHES]) for s in states if int(s[EPOCH]) == epoch)
    stream = elastic_state(Shard(0, 1), merged, 0, ended)
    return position_state(header, epoch, batches, stream=stream)
