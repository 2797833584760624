"""Streams that shuffle: IterDataset.shuffle(window) and factories that learn the epoch."""

import json

import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly
from tar_helpers import all_keys, write_shards


def _records(loader, epoch):
    return list(loader.iter(epoch=epoch))


def test_each_window_is_a_permutation_of_its_records():
    ds = sk.from_iterable(lambda: range(23)).shuffle(window=5, seed=3)
    records = list(ds)
    assert records != list(range(23))
    for start in range(0, 23, 5):
        assert sorted(records[start : start + 5]) == list(range(start, min(start + 5, 23)))


def test_the_order_changes_per_epoch_and_repeats_for_the_same_seed_and_epoch():
    ds = sk.from_iterable(lambda: range(40)).shuffle(window=40, seed=1)
    loader = sk.DataLoader(ds, batch_size=None)
    assert _records(loader, 0) == _records(loader, 0)
    assert _records(loader, 0) != _records(loader, 1)
    other = sk.DataLoader(sk.from_iterable(lambda: range(40)).shuffle(window=40, seed=2))
    assert _records(other, 0) != _records(loader, 0)


def test_without_a_seed_the_loader_seed_is_used():
    ds = sk.from_iterable(lambda: range(40)).shuffle(window=40)
    a, b = (sk.DataLoader(ds, batch_size=None, seed=s) for s in (0, 1))
    assert _records(a, 0) != _records(b, 0)
    assert sorted(_records(a, 0)) == list(range(40))


@pytest.mark.parametrize("window", [1, 4, 7, 100])
def test_resuming_at_every_record_is_exact_and_the_state_is_small(window):
    ds = sk.from_iterable(lambda: range(30)).shuffle(window=window, seed=0)
    it = iter(sk.DataLoader(ds, batch_size=None, seed=4))
    records, states = [], [json.dumps(it.state_dict())]
    for record in it:
        records.append(record)
        states.append(json.dumps(it.state_dict()))
    assert sorted(records) == list(range(30))
    for k, state in enumerate(states):
        assert len(state) < 300  # a cursor, never the window's records
        resumed = list(sk.DataLoader(ds, batch_size=None, seed=4).iter(state=json.loads(state)))
        if k < len(records):
            assert resumed == records[k:], f"stop {k}"


@pytest.mark.parametrize(("workers", "mode"), [(0, "inline"), (2, "thread"), (2, "process")])
def test_shuffled_tar_shards_resume_exactly_in_every_mode(tmp_path, workers, mode):
    shards = write_shards(tmp_path, shards=4, per_shard=6)
    ds = (
        sk.from_tar_shards(shards, shuffle_shards=True)
        .shuffle(window=4)
        .map(lambda r: r["__key__"])
    )
    loader = sk.DataLoader(ds, batch_size=3, num_workers=workers, worker_mode=mode, collate_fn=list)
    with loader:
        for epoch in range(2):
            seen = [k for batch in loader.iter(epoch=epoch) for k in batch]
            assert sorted(seen) == all_keys(4, 6)
        assert_resumes_exactly(loader, epochs=2, max_stops=None if mode != "process" else 4)


def test_a_shuffled_stream_is_elastic_when_its_upstream_is(tmp_path):
    shards = write_shards(tmp_path)
    assert sk.from_tar_shards(shards).shuffle(window=3).elastic
    assert sk.from_tar_shards(shards).map(len).shuffle(window=3).map(str).elastic
    assert not sk.from_iterable(lambda: range(3)).shuffle(window=3).elastic


def test_bad_arguments_are_config_errors():
    ds = sk.from_iterable(lambda: range(3))
    for window in (0, -1, 2.5, True):
        with pytest.raises(sk.ConfigError, match="window"):
            ds.shuffle(window=window)
    with pytest.raises(sk.ConfigError, match="seed"):
        ds.shuffle(window=2, seed=-3)


def test_a_factory_with_an_epoch_parameter_gets_the_epoch():
    calls = []

    def factory(shard, epoch):
        calls.append((shard, epoch))
        return [(epoch, i) for i in range(shard.index, 6, shard.count)]

    loader = sk.DataLoader(sk.from_iterable(factory), batch_size=None)
    assert list(loader) == [(0, i) for i in range(6)]
    assert list(loader) == [(1, i) for i in range(6)]
    assert calls == [(sk.Shard(0, 1), 0), (sk.Shard(0, 1), 1)]
    with sk.DataLoader(
        sk.from_iterable(lambda epoch: [epoch] * 4),
        batch_size=None,
        num_workers=2,
        worker_mode="thread",
    ) as workers:
        assert sorted(workers.iter(epoch=3)) == [3, 3, 3, 3]


def test_an_epoch_aware_factory_resumes_in_its_epoch():
    def factory(epoch):
        return [epoch * 10 + i for i in range(5)]

    loader = sk.DataLoader(sk.from_iterable(factory), batch_size=2)
    assert_resumes_exactly(loader, epochs=3)
    assert [b.tolist() for b in loader.iter(epoch=2)] == [[20, 21], [22, 23], [24]]
