"""The loader state's schema lives in ``stoker._state``: every state a loader writes
holds only the header and the fields of ``SCHEMA``, and checks against it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import stoker as sk
from stoker._state import FORMAT, SCHEMA, ahead_of, check_state, with_ahead

HEADER = {"format", "kind", "seed", "dataset_len", "batch_size", "last_batch", "shuffle", "host"}
FIELDS = {f.key for f in SCHEMA}


def _stream():
    return sk.from_iterable(lambda: iter(range(30)))


LOADERS = {
    "map": lambda: sk.DataLoader(sk.range(30), batch_size=4, shuffle=True),
    "map, unordered": lambda: sk.DataLoader(
        sk.range(30), batch_size=4, num_workers=2, worker_mode="thread", ordered=False
    ),
    "batch sampler": lambda: sk.DataLoader(sk.range(30), batch_sampler=[[0, 1], [2, 3], [4, 5]]),
    "stream": lambda: sk.DataLoader(_stream(), batch_size=4),
    "stream, workers": lambda: sk.DataLoader(
        _stream(), batch_size=4, num_workers=2, worker_mode="thread"
    ),
    "stream, hosts": lambda: sk.DataLoader(_stream(), batch_size=4, shard=sk.Shard(1, 2)),
}


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_every_state_holds_the_header_and_the_schema_fields_only(name):
    loader = LOADERS[name]()
    with loader:
        it = iter(loader)
        states = []
        for _ in it:
            states.append(json.loads(json.dumps(it.state_dict())))
        states.append(loader.state_dict())
    for state in states:
        assert state["format"] == FORMAT
        assert set(state) <= HEADER | FIELDS, set(state) - HEADER - FIELDS
        required = {f.key for f in SCHEMA if state["kind"] in f.required}
        assert required <= set(state)
        assert all(isinstance(k, int) for k in ahead_of(state))


def test_the_torch_drop_in_adds_its_own_field_of_the_schema():
    pytest.importorskip("torch")
    import stoker.torch

    loader = stoker.torch.DataLoader(list(range(10)), batch_size=4)
    it = iter(loader)
    next(it)
    assert set(loader.state_dict()) <= HEADER | FIELDS
    assert "torch" in FIELDS
    assert "torch" in it.state_dict()


def test_a_state_missing_a_required_field_of_the_schema_is_refused():
    loader = sk.DataLoader(sk.from_arrays(np.arange(12)), batch_size=4)
    it = iter(loader)
    next(it)
    state = it.state_dict()
    for field in SCHEMA:
        if "map" in field.required:
            broken = {k: v for k, v in state.items() if k != field.key}
            with pytest.raises(sk.StateError, match=field.key):
                loader.iter(state=broken)
    assert with_ahead(state, []) is state
    assert ahead_of(with_ahead(state, [3])) == [3]
    header = {k: v for k, v in state.items() if k in HEADER}
    assert check_state(state, header) == state
