"""Bad input is refused when it is given, and leaves the loader as it was.

A state whose nested entries (the sampler's state, the rollover carry, the batches
handed out ahead) are damaged is a StateError from ``load_state_dict`` and
``iter(state=...)``, not a crash (or a silent wrong batch) on the next pass; a
dataset that is not one is a TypeError.
"""

import copy
import json

import pytest

import stoker as sk


def _loader(**kwargs):
    return sk.DataLoader(sk.range(0, 22), batch_size=4, shuffle=True, seed=1, **kwargs)


def _state_after(loader, batches):
    it = iter(loader)
    for _ in range(batches):
        next(it)
    return json.loads(json.dumps(it.state_dict()))


def _garbage(good):
    sampler = good["sampler"]
    return {
        "sampler is a string": {**good, "sampler": "garbage"},
        "sampler is a list": {**good, "sampler": [1, 2]},
        "sampler of another kind": {**good, "sampler": {**sampler, "kind": "Nope"}},
        "sampler without position": {
            **good,
            "sampler": {k: v for k, v in sampler.items() if k != "position"},
        },
        "negative position": {**good, "sampler": {**sampler, "position": -3}},
        "position past the end": {**good, "sampler": {**sampler, "position": 999}},
        "position not an int": {**good, "sampler": {**sampler, "position": "4"}},
        "sampler at another epoch": {**good, "sampler": {**sampler, "epoch": 5}},
        "carry is a string": {**good, "carry": "xyz"},
        "carry is a dict": {**good, "carry": {"a": 1}},
        "carry holds ints": {**good, "carry": [1, 2]},
        "carry index past the end": {**good, "carry": [[0, 22]]},
        "carry from a later epoch": {**good, "carry": [[3, 1]]},
        "carry holds strings": {**good, "carry": [["0", "1"]]},
        "ahead is a string": {**good, "ahead": "zz"},
        "ahead holds negatives": {**good, "ahead": [-1]},
    }


@pytest.mark.parametrize("case", list(_garbage(_state_after(_loader(), 1))))
def test_load_state_dict_refuses_damaged_nested_entries_and_keeps_the_old_state(case):
    loader = _loader(last_batch="rollover")
    good = _state_after(loader, 2)
    bad = _garbage(good)[case]
    before = copy.deepcopy(good)
    loader.load_state_dict(good)
    with pytest.raises(sk.StateError):
        loader.load_state_dict(bad)
    assert loader.state_dict() == before  # the loader is as it was
    expected = [b.tolist() for b in _loader(last_batch="rollover").iter(state=good)]
    assert [b.tolist() for b in loader] == expected
    with pytest.raises(sk.StateError):
        loader.iter(state=bad)


def test_a_real_rollover_carry_is_accepted():
    loader = _loader(last_batch="rollover")
    list(loader)  # 22 records in batches of 4: 2 carried into epoch 1
    state = json.loads(json.dumps(loader.state_dict()))
    assert len(state["carry"]) == 2
    loader.load_state_dict(state)
    assert len(list(loader)) == 6


@pytest.mark.parametrize("dataset", [42, 3.5, None, object()])
def test_a_dataset_of_the_wrong_type_is_a_type_error(dataset):
    with pytest.raises(TypeError, match=r"DataLoader needs a dataset, got"):
        sk.DataLoader(dataset, batch_size=2)
