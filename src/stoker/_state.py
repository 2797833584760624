"""Loader state <-> JSON: versioned, validated, never unpickled.

A loader state is a small dict of JSON types. Its header repeats the settings that
decide which batches come next (seed, dataset length, batch size, ...); restoring a
state into a loader whose settings differ is refused with a :class:`StateError`
that names the field, instead of silently yielding other batches.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .errors import StateError

__all__ = ["FORMAT", "check_state"]

FORMAT = "stoker.loader/1"

_HINTS = {
    "seed": "pass the same seed=",
    "dataset_len": "the dataset changed size since the state was saved",
    "batch_size": "pass the same batch_size=",
    "last_batch": "pass the same last_batch=",
    "shuffle": "pass the same shuffle=",
    "kind": "a state of a map-style loader cannot restore a stream loader, and vice versa",
}

_REQUIRED = {
    "map": ("epoch", "batches", "carry", "sampler"),
    "batch_sampler": ("epoch", "batches"),
    "stream": ("epoch", "batches", "stream"),
}


def check_state(state: object, header: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``state`` against this loader's ``header`` and return a clean copy.

    Example:
        >>> check_state({"format": FORMAT, "kind": "batch_sampler", "seed": 0,
        ...              "epoch": 1, "batches": 2}, {"format": FORMAT, "seed": 0,
        ...              "kind": "batch_sampler"})["batches"]
        2

    Errors:
        StateError: not a stoker state, another format version, a field that
            differs from this loader's settings, or missing fields.
    """
    if not isinstance(state, Mapping):
        raise StateError(f"a loader state is a dict, got {type(state).__name__}")
    if state.get("format") != FORMAT:
        raise StateError(
            f"not a stoker loader state of format {FORMAT!r} (got format "
            f"{state.get('format')!r}): pass what it.state_dict() or loader.state_dict() returned"
        )
    for key, expected in header.items():
        if state.get(key) != expected:
            hint = _HINTS.get(key, "")
            raise StateError(
                f"the state was saved with {key}={state.get(key)!r}, but this loader has "
                f"{key}={expected!r}; refusing to resume with other batches"
                + (f" ({hint})" if hint else "")
            )
    missing = [k for k in _REQUIRED[header["kind"]] if k not in state]
    if missing:
        raise StateError(f"the state lacks the fields {missing}: it is damaged or hand-made")
    epoch, batches = state["epoch"], state["batches"]
    if not isinstance(epoch, int) or epoch < 0 or not isinstance(batches, int) or batches < 0:
        raise StateError(
            f"the state has epoch={epoch!r}, batches={batches!r}: both must be ints >= 0"
        )
    try:
        clean: dict[str, Any] = json.loads(json.dumps(state))
    except (TypeError, ValueError) as exc:
        raise StateError(f"a loader state holds only JSON types: {exc}") from exc
    return clean
