"""Elastic streams: a tar-shard stream's state resumes under another num_workers and host count.

"Exactly once" here means: the records handed out before the state was saved, plus
those read after restoring it (in any layout), are every record of the epoch, once.
"""

import json

import pytest

import stoker as sk
from tar_helpers import all_keys, keys_of, write_shards

SHARDS, PER = 5, 7
ONE_HOST = sk.Shard(0, 1)


@pytest.fixture
def shards(tmp_path):
    return write_shards(tmp_path, shards=SHARDS, per_shard=PER)


def _mode(workers):
    return "thread" if workers else "inline"


def _loader(ds, workers, hosts=ONE_HOST, batch_size=3, mode=None):
    return sk.DataLoader(
        ds,
        batch_size=batch_size,
        num_workers=workers,
        worker_mode=mode or _mode(workers),
        shard=hosts if hosts.count > 1 else None,
        seed=11,
    )


def _run(layout, ds, steps, batch_size=3):
    """Each host of ``layout`` = (hosts, workers) takes ``steps`` batches; returns the
    keys handed out and every host's JSON state."""
    count, workers = layout
    seen, states = [], []
    for h in range(count):
        with _loader(ds, workers, sk.Shard(h, count), batch_size) as loader:
            it = loader.iter(epoch=0)
            for _ in range(steps):
                try:
                    seen.extend(keys_of([next(it)]))
                except StopIteration:
                    break
            states.append(json.loads(json.dumps(it.state_dict())))
            it.close()
    return seen, states


def _rest(layout, ds, state, batch_size=3):
    count, workers = layout
    rest = []
    for h in range(count):
        with _loader(ds, workers, sk.Shard(h, count), batch_size) as loader:
            rest.extend(keys_of(loader.iter(state=state)))
    return rest


@pytest.mark.parametrize(
    ("before", "after"), [(0, 2), (2, 0), (2, 3), (3, 2), (1, 4), (4, 1), (2, 2)]
)
@pytest.mark.parametrize("steps", [1, 3, 6])
def test_resumes_under_another_num_workers(shards, before, after, steps):
    ds = sk.from_tar_shards(shards, shuffle_shards=True).filter(lambda r: r["cls"] != b"9")
    seen, (state,) = _run((1, before), ds, steps)
    rest = _rest((1, after), ds, state)
    assert sorted(seen + rest) == all_keys(SHARDS, PER)
    assert _rest((1, after), ds, state) == rest  # a restore is deterministic


def test_process_workers_resume_under_another_count(shards, no_leaks):
    ds = sk.from_tar_shards(shards).map(lambda r: {"__key__": r["__key__"]})
    with _loader(ds, 2, mode="process") as loader:
        it = iter(loader)
        seen = keys_of([next(it), next(it)])
        state = it.state_dict()
        it.close()
    with _loader(ds, 3, mode="process") as loader:
        rest = keys_of(loader.iter(state=state))
    assert sorted(seen + rest) == all_keys(SHARDS, PER)


@pytest.mark.parametrize(
    ("before", "after"),
    [((1, 0), (2, 0)), ((1, 2), (3, 1)), ((2, 0), (1, 0)), ((2, 2), (3, 0)), ((3, 1), (2, 2))],
)
@pytest.mark.parametrize("steps", [1, 2, 4])
def test_resumes_under_another_host_count(shards, before, after, steps):
    ds = sk.from_tar_shards(shards, shuffle_shards=True)
    seen, states = _run(before, ds, steps)
    state = sk.merge_host_states(states) if before[0] > 1 else states[0]
    if state["epoch"] > 0:  # every host had ended the epoch
        assert sorted(seen) == all_keys(SHARDS, PER)
        return
    assert "host" not in state
    rest = _rest(after, ds, state)
    assert sorted(seen + rest) == all_keys(SHARDS, PER)


def test_the_same_layout_continues_exactly(shards):
    ds = sk.from_tar_shards(shards, shuffle_shards=True)
    with _loader(ds, 2) as loader:
        reference = keys_of(loader.iter(epoch=0))
        it = loader.iter(epoch=0)
        head = keys_of([next(it) for _ in range(3)])
        state = it.state_dict()
        it.close()
        assert head + keys_of(loader.iter(state=state)) == reference


@pytest.mark.parametrize("steps", [1, 10, 33])
def test_unbatched_streams_are_elastic_too(shards, steps):
    ds = sk.from_tar_shards(shards)
    seen, (state,) = _run((1, 2), ds, steps, batch_size=None)
    rest = _rest((1, 3), ds, state, batch_size=None)
    assert sorted(seen + rest) == all_keys(SHARDS, PER)


def test_one_host_state_on_another_host_count_asks_for_all_hosts(shards):
    ds = sk.from_tar_shards(shards)
    _, states = _run((2, 1), ds, 1)
    with pytest.raises(sk.StateError, match="merge_host_states"):
        _loader(ds, 1, sk.Shard(0, 3)).iter(state=states[0])
    with pytest.raises(sk.StateError, match="merge_host_states"):
        _loader(ds, 1).iter(state=states[0])
    with pytest.raises(sk.StateError, match="belongs to host 0"):
        _loader(ds, 2, sk.Shard(1, 2)).iter(state=states[0])
    with pytest.raises(sk.StateError, match="each host once"):
        sk.merge_host_states([states[0], states[0]])


def test_a_stream_that_is_not_elastic_needs_the_same_worker_count():
    ds = sk.from_iterable(lambda: range(40))
    assert not ds.elastic
    with _loader(ds, 2) as loader:
        it = iter(loader)
        next(it)
        state = it.state_dict()
        it.close()
    with pytest.raises(sk.StateError, match=r"num_workers=2.*from_tar_shards"):
        _loader(ds, 3).iter(state=state)
    states = []
    for h in range(2):
        it = iter(_loader(ds, 0, sk.Shard(h, 2)))
        next(it)
        states.append(it.state_dict())
    with pytest.raises(sk.StateError, match="not elastic"):
        sk.merge_host_states(states)


def test_merge_host_states_returns_a_map_style_state_as_it_is():
    data = sk.range(0, 20)
    states = []
    for h in range(2):
        it = iter(sk.DataLoader(data, batch_size=2, shard=sk.Shard(h, 2)))
        next(it)
        states.append(it.state_dict())
    assert sk.merge_host_states(states) == states[0]
    with pytest.raises(sk.StateError):
        sk.merge_host_states([])
