"""sk.mix over streams: weights, the rule for a stream that runs out, exact resume, workers."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly

K = 100_000


class Counter(sk.IterDataset[int]):
    """A user stream with its own state: the records base, base + 1, ... base + n - 1."""

    def __init__(self, base: int, n: int) -> None:
        self.base, self.n, self.pos = base, n, 0
        self.resume: int | None = None

    def __iter__(self) -> Iterator[int]:
        self.pos, self.resume = self.resume or 0, None
        while self.pos < self.n:
            self.pos += 1
            yield self.base + self.pos - 1

    def state_dict(self) -> dict[str, int]:
        return {"pos": self.pos}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.resume = state["pos"]


def streams(sizes=(300, 200, 100), user=False):
    if user:
        return [Counter(K * k, n) for k, n in enumerate(sizes)]
    return [
        sk.from_iterable(lambda k=k, n=n: iter(range(K * k, K * k + n)))
        for k, n in enumerate(sizes)
    ]


def source_of(records):
    return np.asarray(records) // K


def flat(batches):
    return [int(x) for b in batches for x in np.asarray(b).ravel()]


@pytest.mark.parametrize("user", [False, True])
def test_realised_shares_follow_the_weights(user):
    weights = [0.5, 0.3, 0.2]
    mix = sk.mix(streams((5000, 5000, 5000), user=user), weights=weights)
    records = flat(sk.DataLoader(mix, batch_size=50))
    src = source_of(records)
    for n in range(50, len(src) + 1, 50):
        counts = np.bincount(src[:n], minlength=3)
        assert np.abs(counts - n * np.array(weights)).max() <= 2, n  # the stated tolerance
    for k in range(3):  # each stream's own order
        mine = [r for r in records if r // K == k]
        assert mine == list(range(K * k, K * k + len(mine)))


@pytest.mark.parametrize(("mode", "workers"), [("inline", 0), ("thread", 2), ("process", 2)])
def test_drop_reads_every_stream_exactly_once_per_pass(mode, workers):
    mix = sk.mix(streams(), weights=[0.2, 0.5, 0.3], on_exhausted="drop")
    with sk.DataLoader(mix, batch_size=16, num_workers=workers, worker_mode=mode) as loader:
        for _ in range(2):
            records = flat(loader)
            expected = [K * k + j for k, n in enumerate((300, 200, 100)) for j in range(n)]
            assert sorted(records) == expected


def test_stop_ends_at_the_first_stream_that_runs_out():
    mix = sk.mix(streams((10, 1000)), weights=[1, 1])
    records = list(mix)
    assert source_of(records).tolist().count(0) == 10
    assert len(records) <= 21
    assert next(iter(mix), None) == 0  # a new pass starts again


def test_restart_reads_a_stream_again_and_counts_the_restarts():
    mix = sk.mix(streams((3, 1000)), weights=[1, 1], on_exhausted="restart")
    it = iter(mix)
    records = [next(it) for _ in range(40)]
    small = [r for r in records if r < K]
    assert small == [0, 1, 2] * (len(small) // 3) + [0, 1, 2][: len(small) % 3]
    assert mix.state_dict()["mixer"]["restarts"][0] == len(small) // 3 - (len(small) % 3 == 0)


def test_restart_of_an_empty_stream_drops_it():
    mix = sk.mix(streams((0, 5)), weights=[1, 1], on_exhausted="restart")
    it = iter(mix)
    assert [next(it) for _ in range(7)] == [K, K + 1, K + 2, K + 3, K + 4, K, K + 1]


@pytest.mark.parametrize("user", [False, True])
@pytest.mark.parametrize("rule", ["stop", "drop"])
def test_resumes_exactly_at_every_step_across_schedule_changes(user, rule):
    schedule = [(0, [1, 1, 1]), (40, [0, 1, 3]), (90, [5, 1, 1])]
    mix = sk.mix(streams(user=user), schedule=schedule, on_exhausted=rule)
    assert_resumes_exactly(sk.DataLoader(mix, batch_size=16))


@pytest.mark.parametrize("user", [False, True])
def test_a_restart_mixture_resumes_exactly_at_every_step(user):
    """It never ends: compare the next batches after each of the first 40 stops."""

    def loader():
        mix = sk.mix(streams((30, 20, 10), user=user), [3, 2, 1], on_exhausted="restart")
        return sk.DataLoader(mix, batch_size=8)

    it = iter(loader())
    batches, states = [], []
    for _ in range(45):
        batches.append(next(it).tolist())
        states.append(json.loads(json.dumps(it.state_dict())))
    assert sum(states[-1]["stream"]["mixer"]["restarts"]) > 10
    for stop in range(40):
        resumed = loader().iter(state=states[stop])
        assert [next(resumed).tolist() for _ in range(5)] == batches[stop + 1 : stop + 6]


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_with_workers_resumes_exactly_under_the_same_num_workers(mode):
    schedule = [(0, [1, 1, 1]), (30, [0, 1, 3]), (70, [5, 1, 1])]
    mix = sk.mix(streams(), schedule=schedule, on_exhausted="drop")
    with sk.DataLoader(mix, batch_size=8, num_workers=2, worker_mode=mode) as loader:
        assert_resumes_exactly(loader, max_stops=10)
        records = flat(loader)
    assert sorted(records) == sorted(flat(sk.DataLoader(mix, batch_size=8)))


def test_set_weights_is_written_into_the_state_and_replayed():
    mix = sk.mix(streams(), weights=[1, 1, 1])
    loader = sk.DataLoader(mix, batch_size=10, prefetch=0)
    it = iter(loader)
    batches, states = [], []
    for i, batch in enumerate(it):
        batches.append(batch.tolist())
        if i == 3:
            mix.set_weights([0, 0, 1])
        states.append(json.loads(json.dumps(it.state_dict())))
    assert set(source_of(flat(batches[4:8])).tolist()) == {2}
    for stop in range(3, len(batches)):
        fresh = sk.DataLoader(sk.mix(streams(), weights=[1, 1, 1]), batch_size=10)
        assert [b.tolist() for b in fresh.iter(state=states[stop])] == batches[stop + 1 :]


def test_set_weights_with_thread_workers_applies_to_every_part():
    mix = sk.mix(streams((2000, 2000, 2000)), weights=[1, 1, 1])
    with sk.DataLoader(mix, batch_size=10, num_workers=2, worker_mode="thread") as loader:
        it = iter(loader)
        next(it)
        mix.set_weights([1, 0, 0])
        late = flat([next(it) for _ in range(30)][-10:])
    assert set(source_of(late).tolist()) == {0}


def test_set_weights_after_process_workers_started_is_refused():
    mix = sk.mix(streams(), weights=[1, 1, 1])
    with sk.DataLoader(mix, batch_size=10, num_workers=2, worker_mode="process") as loader:
        next(iter(loader))
        with pytest.raises(sk.NotSupportedError, match="schedule="):
            mix.set_weights([1, 0, 0])


def test_stats_report_the_shares_of_all_readers():
    mix = sk.mix({"a": streams()[0], "b": streams()[1]}, weights=[0.75, 0.25])
    with sk.DataLoader(mix, batch_size=20, num_workers=2, worker_mode="thread") as loader:
        it = iter(loader)
        next(it)
        next(it)
        report = it.stats().mixture
    assert [s.name for s in report] == ["a", "b"]
    assert sum(s.records for s in report) == 40
    assert report[0].share == pytest.approx(0.75, abs=0.05)
    assert report[0].weight == pytest.approx(0.75)


def test_a_state_of_another_mixture_is_refused():
    loader = sk.DataLoader(sk.mix(streams()), batch_size=10)
    it = iter(loader)
    next(it)
    state = json.loads(json.dumps(it.state_dict()))
    named = sk.mix(dict(zip("abc", streams(), strict=True)))
    with pytest.raises(sk.StateError, match="sources"):
        list(sk.DataLoader(named, batch_size=10).iter(state=state))
    with pytest.raises(sk.StateError, match="2 sources"):
        list(sk.DataLoader(sk.mix(streams()[:2]), batch_size=10).iter(state=state))
    with pytest.raises(sk.StateError, match="on_exhausted"):
        list(sk.DataLoader(sk.mix(streams(), on_exhausted="drop"), batch_size=10).iter(state=state))


def test_bad_arguments():
    with pytest.raises(sk.ConfigError, match="num_samples"):
        sk.mix(streams(), num_samples=10)
    with pytest.raises(sk.ConfigError, match=r"2=-1\.0"):
        sk.mix(streams(), weights=[1, 1, -1])
    with pytest.raises(sk.ConfigError, match="increasing"):
        sk.mix(streams(), schedule=[(0, [1, 1, 1]), (5, [1, 0, 0]), (5, [0, 1, 0])])
