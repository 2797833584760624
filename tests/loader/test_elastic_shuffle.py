"""Shuffled tar-shard streams stay elastic: ``.shuffle(window)`` (and ``shuffle_shards``)
resumes under another ``num_workers`` and host count, every record once; streams that
are not elastic refuse with a StateError that says what must match."""

import json

import datasets
import pytest

import stoker as sk
from tar_helpers import all_keys, keys_of, write_shards

SHARDS, PER = 5, 7
ALL = all_keys(SHARDS, PER)


@pytest.fixture
def shards(tmp_path):
    return write_shards(tmp_path, shards=SHARDS, per_shard=PER)


def _stream(shards, window=4, shuffle_shards=False):
    return sk.from_tar_shards(shards, shuffle_shards=shuffle_shards).shuffle(window=window)


def _loader(ds, workers, hosts=None, mode=None, batch_size=3):
    return sk.DataLoader(
        ds,
        batch_size=batch_size,
        num_workers=workers,
        worker_mode=mode or ("thread" if workers else "inline"),
        shard=hosts,
        seed=5,
    )


def _take(ds, workers, steps, state=None, hosts=None, mode=None):
    """``steps`` batches from ``state``; returns the keys and the JSON state after them."""
    with _loader(ds, workers, hosts, mode) as loader:
        it = loader.iter(state=state) if state is not None else loader.iter(epoch=0)
        seen = []
        for _ in range(steps):
            try:
                seen.extend(keys_of([next(it)]))
            except StopIteration:
                break
        saved = json.loads(json.dumps(it.state_dict()))
        it.close()
    return seen, saved


def _rest(ds, workers, state, hosts=None, mode=None):
    with _loader(ds, workers, hosts, mode) as loader:
        return keys_of(loader.iter(state=state))


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1), (0, 2), (2, 0), (1, 4)])
@pytest.mark.parametrize("steps", [1, 3, 5])
@pytest.mark.parametrize("shuffle_shards", [False, True])
def test_resumes_under_another_num_workers(shards, before, after, steps, shuffle_shards):
    ds = _stream(shards, shuffle_shards=shuffle_shards)
    seen, state = _take(ds, before, steps)
    assert len(json.dumps(state)) < 2000  # counters and shard positions, no records
    rest = _rest(ds, after, state)
    assert sorted(seen + rest) == ALL
    assert _rest(ds, after, state) == rest  # a restore is deterministic


@pytest.mark.parametrize("window", [1, 2, 5, 9, 40])
def test_every_window_size_and_stop(shards, window):
    ds = _stream(shards, window=window, shuffle_shards=True).map(lambda r: r)
    for steps in range(1, 13, 2):
        seen, state = _take(ds, 2, steps)
        assert sorted(seen + _rest(ds, 3, state)) == ALL, steps


def test_resumes_again_after_a_resume(shards):
    # 2 workers -> 3 (windows dealt out, some still pending) -> 1: still each record once.
    ds = _stream(shards, window=8, shuffle_shards=True)
    first, state = _take(ds, 2, 2)  # each worker emitted 3 of its first window's 8
    second, state = _take(ds, 3, 1, state)  # reader 0 emits 3 more of one of them
    pending = [[u["emitted"] for u in s["pending"]] for s in state["stream"]["states"]]
    assert pending == [[6], [3], []]  # the partly emitted windows travel in the states
    third = _rest(ds, 1, state)
    assert sorted(first + second + third) == ALL


def test_the_same_layout_after_a_deal_continues_exactly(shards):
    ds = _stream(shards, window=6)
    _, state = _take(ds, 2, 2)
    with _loader(ds, 3) as loader:
        reference = keys_of(loader.iter(state=state))
    head, again = _take(ds, 3, 2, state)
    assert head + _rest(ds, 3, again) == reference


@pytest.mark.parametrize(
    ("before", "after"), [((2, 1), (3, 1)), ((2, 0), (3, 2)), ((3, 2), (1, 0))]
)
@pytest.mark.parametrize("steps", [1, 3])
def test_resumes_under_another_host_count(shards, before, after, steps):
    ds = _stream(shards, window=5, shuffle_shards=True)
    hosts, workers = before
    seen, states = [], []
    for h in range(hosts):
        keys, state = _take(ds, workers, steps, hosts=sk.Shard(h, hosts))
        seen += keys
        states.append(state)
    merged = sk.merge_host_states(states)
    rest = []
    for h in range(after[0]):
        rest += _rest(ds, after[1], merged, hosts=sk.Shard(h, after[0]))
    assert sorted(seen + rest) == ALL


def test_process_workers_resume_under_another_count(shards, no_leaks):
    ds = _stream(shards, window=4, shuffle_shards=True).map(lambda r: {"__key__": r["__key__"]})
    seen, state = _take(ds, 2, 3, mode="process")
    rest = _rest(ds, 3, state, mode="process")
    assert sorted(seen + rest) == ALL


def _refused(ds, before, after):
    _, state = _take(ds, before, 2)
    with pytest.raises(sk.StateError) as info:
        _rest(ds, after, state)
    message = str(info.value)
    assert f"saved with num_workers={before}" in message
    assert f"with num_workers={before} to resume" in message
    assert "from_tar_shards" in message  # which streams are elastic
    assert "{" not in message  # never the raw state
    return message


@pytest.mark.parametrize(("before", "after"), [(2, 3), (0, 2), (2, 0), (3, 1)])
def test_a_stream_that_is_not_elastic_names_the_worker_count(before, after):
    ds = sk.from_iterable(lambda: ({"__key__": str(i)} for i in range(40))).shuffle(window=5)
    message = _refused(ds, before, after)
    assert "FromIterable is not elastic" in message


@pytest.mark.parametrize(("before", "after"), [(2, 3), (2, 0), (0, 1)])
def test_an_hf_stream_names_the_worker_count(before, after):
    table = datasets.Dataset.from_dict({"x": list(range(40))})
    ds = sk.from_hf(table.to_iterable_dataset(num_shards=4)).map(lambda r: {"__key__": r["x"]})
    _refused(ds, before, after)
