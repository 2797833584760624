"""sk.mix over map-style datasets: proportions, weights that change mid-run, exact resume."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_in_every_mode

SIZES = (600, 400, 300)
K = 100_000


def sources(sizes=SIZES):
    """Source k holds the records 100_000 * k + j."""
    return [sk.from_arrays(np.arange(K * k, K * k + n)) for k, n in enumerate(sizes)]


def source_of(records):
    return np.asarray(records) // K


def flat(batches):
    return [int(x) for b in batches for x in np.asarray(b).ravel()]


def run(loader, state=None):
    it = loader.iter(state=state) if state is not None else loader.iter(epoch=0)
    return [b.tolist() for b in it]


# -- proportions ------------------------------------------------------------------------


@pytest.mark.parametrize("shuffle", [False, True])
def test_every_prefix_follows_the_weights_within_two_records(shuffle):
    weights = [0.5, 0.3, 0.2]
    ds = sk.mix(sources((5000, 5000, 5000)), weights=weights)
    records = flat(sk.DataLoader(ds, batch_size=50, shuffle=shuffle, seed=3))
    src = source_of(records)
    assert len(records) == len(set(records))  # "stop": no record twice in an epoch
    for n in range(50, len(src) + 1, 50):
        counts = np.bincount(src[:n], minlength=3)
        # the stated tolerance: at most 2 records off the exact share, at every prefix
        assert np.abs(counts - n * np.array(weights)).max() <= 2, n


def test_stop_ends_before_the_first_source_runs_out_and_reads_no_record_twice():
    ds = sk.mix(sources((100, 1000)), weights=[1, 1])
    records = flat(sk.DataLoader(ds, batch_size=8))
    src = source_of(records)
    assert (src == 0).sum() == 100
    assert len(records) <= 201
    assert len(set(records)) == len(records)
    assert len(sk.DataLoader(ds, batch_size=8)) == math.ceil(len(records) / 8)


@pytest.mark.parametrize("shuffle", [False, True])
def test_drop_reads_every_record_exactly_once_per_epoch(shuffle):
    ds = sk.mix(sources(), weights=[0.2, 0.5, 0.3], on_exhausted="drop")
    loader = sk.DataLoader(ds, batch_size=32, shuffle=shuffle, seed=1)
    for _ in range(2):
        records = flat(loader)
        expected = [K * k + j for k, n in enumerate(SIZES) for j in range(n)]
        assert sorted(records) == expected
    assert len(loader) == math.ceil(sum(SIZES) / 32)


def test_restart_keeps_the_weights_for_the_whole_epoch_and_each_pass_is_a_permutation():
    ds = sk.mix(sources((50, 500)), weights=[0.5, 0.5], on_exhausted="restart", num_samples=400)
    records = flat(sk.DataLoader(ds, batch_size=40, shuffle=True, seed=2))
    assert len(records) == 400
    small = [r for r in records if r < K]
    assert len(small) == 200  # four passes through the 50 records of source 0
    passes = [small[i : i + 50] for i in range(0, 200, 50)]
    assert all(sorted(p) == list(range(50)) for p in passes)
    assert passes[0] != passes[1]  # a fresh order per pass


def test_zero_weight_source_is_never_read():
    ds = sk.mix(sources(), weights={"0": 1, "1": 0, "2": 1})
    assert 1 not in set(source_of(flat(sk.DataLoader(ds, batch_size=16))).tolist())


def test_same_batches_in_every_worker_mode():
    ds = sk.mix(sources(), weights=[3, 2, 1], schedule=None).map(lambda x: x * 2)
    assert_same_in_every_mode(ds, batch_size=16, shuffle=True, seed=4, epochs=2)


# -- changing weights -------------------------------------------------------------------


def record_run(loader, mix, changes):
    """Batches and JSON states of one epoch; ``changes[i]`` is set after batch i."""
    it = loader.iter(epoch=0)
    batches, states = [], []
    for i, batch in enumerate(it):
        batches.append(batch.tolist())
        if i in changes:
            mix.set_weights(changes[i])
        states.append(json.loads(json.dumps(it.state_dict())))
    return batches, states


def test_set_weights_applies_from_the_next_planned_batch_and_is_replayed_from_the_state():
    k = 5
    never = run(sk.DataLoader(sk.mix(sources(), weights=[1, 1, 1]), batch_size=20, prefetch=0))
    mix = sk.mix(sources(), weights=[1, 1, 1])
    loader = sk.DataLoader(mix, batch_size=20, prefetch=0)
    changed, states = record_run(loader, mix, {k - 1: [0, 0, 1]})
    assert changed[:k] == never[:k]  # before the change: as if it never happened
    assert set(source_of(flat(changed[k:])).tolist()) == {2}
    # a state saved right after set_weights names the change; restored in a loader
    # over a new mixture built with the first weights only, it replays the change
    for stop in range(len(changed)):
        fresh = sk.DataLoader(sk.mix(sources(), weights=[1, 1, 1]), batch_size=20)
        expected = never if stop < k - 1 else changed
        assert run(fresh, states[stop]) == expected[stop + 1 :], stop


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_set_weights_with_workers_resumes_exactly_at_every_step(mode):
    mix = sk.mix(sources(), weights=[1, 1, 1])
    kw = {"batch_size": 16, "shuffle": True, "seed": 5}
    changes = {3: [0.1, 0.1, 0.8], 9: [0.6, 0.2, 0.2]}
    with sk.DataLoader(mix, num_workers=2, worker_mode=mode, **kw) as loader:
        changed, states = record_run(loader, mix, changes)
    later = source_of(flat(changed[-10:]))
    assert (later == 0).mean() > 0.4  # the second change is in force at the end
    for stop in range(9, len(changed), 3):
        fresh = sk.DataLoader(sk.mix(sources(), weights=[1, 1, 1]), **kw)
        assert run(fresh, states[stop]) == changed[stop + 1 :], stop


def test_weights_carry_into_the_next_epoch_through_the_state():
    mix = sk.mix(sources(), weights=[1, 1, 1], on_exhausted="drop")
    loader = sk.DataLoader(mix, batch_size=50)
    it = iter(loader)
    next(it)
    mix.set_weights([0, 1, 0])
    list(it)
    state = json.loads(json.dumps(loader.state_dict()))
    assert state["epoch"] == 1
    expected = run(loader, state)
    fresh_mix = sk.mix(sources(), weights=[1, 1, 1], on_exhausted="drop")
    assert run(sk.DataLoader(fresh_mix, batch_size=50), state) == expected
    assert source_of(expected[0]).tolist() == [1] * 50
    assert fresh_mix.weights == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("mode", ["inline", "thread", "process"])
def test_schedule_resumes_exactly_at_every_step_across_changes_and_epochs(mode):
    schedule = [(0, [1, 1, 1]), (96, [0, 1, 3]), (250, [5, 1, 0]), (700, [1, 1, 1])]
    mix = sk.mix(sources(), schedule=schedule)
    workers = 0 if mode == "inline" else 2
    kw = {"batch_size": 32, "shuffle": True, "seed": 2}
    with sk.DataLoader(mix, num_workers=workers, worker_mode=mode, **kw) as loader:
        assert_resumes_exactly(loader, epochs=2, max_stops=None if mode == "inline" else 8)
        first = flat(run(loader))
    assert set(source_of(first[96:128]).tolist()) == {1, 2}
    assert 2 not in set(source_of(first[256:288]).tolist())


def test_schedule_function_of_the_record():
    mix = sk.mix(sources(), schedule=lambda r: [1, 0, 0] if r < 64 else [0, 0, 1])
    batches = run(sk.DataLoader(mix, batch_size=32))
    assert set(source_of(flat(batches[:2])).tolist()) == {0}
    assert set(source_of(flat(batches[2:4])).tolist()) == {2}
    assert_resumes_exactly(sk.DataLoader(mix, batch_size=32), max_stops=5)


@pytest.mark.parametrize("hosts", [2, 3])
def test_host_count_change_resumes_exactly(hosts):
    b = 6
    mix = sk.mix(sources(), weights=[1, 1, 1])
    single = sk.DataLoader(mix, batch_size=b * hosts, shuffle=True, seed=9)
    it = iter(single)
    reference = []
    for i, batch in enumerate(it):
        reference.append(batch.tolist())
        if i == 2:
            mix.set_weights([0.7, 0.2, 0.1])
        if i == 5:
            state = json.loads(json.dumps(it.state_dict()))
    rest = reference[6:]
    per_host = []
    for h in range(hosts):
        m = sk.mix(sources(), weights=[1, 1, 1])
        loader = sk.DataLoader(m, batch_size=b, shuffle=True, seed=9, shard=sk.Shard(h, hosts))
        per_host.append(run(loader, state))
    joined = [[x for part in step for x in part] for step in zip(*per_host, strict=True)]
    cut = [g[: len(g) // hosts * hosts] for g in rest]  # a remainder that does not split
    assert joined == [g for g in cut if g]
    # and back: a state taken on the hosts resumes on one host
    m = sk.mix(sources(), weights=[1, 1, 1])
    host0 = sk.DataLoader(m, batch_size=b, shuffle=True, seed=9, shard=sk.Shard(0, hosts))
    it = host0.iter(state=state)
    next(it)
    moved = json.loads(json.dumps(it.state_dict()))
    back = sk.DataLoader(sk.mix(sources()), batch_size=b * hosts, shuffle=True, seed=9)
    assert run(back, moved) == rest[1:]


# -- visibility -------------------------------------------------------------------------


def test_stats_report_the_realised_share_next_to_the_weights():
    mix = sk.mix({"web": sources()[0], "code": sources()[1]}, weights=[0.8, 0.2])
    it = iter(sk.DataLoader(mix, batch_size=50))
    for _ in range(4):
        next(it)
    report = it.stats().mixture
    assert [s.name for s in report] == ["web", "code"]
    assert abs(report[0].records - 160) <= 1
    assert sum(s.records for s in report) == 200
    assert [s.weight for s in report] == pytest.approx([0.8, 0.2])
    assert report[0].share == pytest.approx(0.8, abs=0.01)
    assert iter(sk.DataLoader(sk.range(4), batch_size=2)).stats().mixture is None


# -- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("weights", "named"),
    [
        ([1, -1, 1], "1=-1.0"),
        ([0, 0, 0], "all zero"),
        ([1, 1], "3 sources"),
        ([math.nan, 1, 1], "0=nan"),
        ([math.inf, 1, 1], "0=inf"),
        (["a", "b", "c"], "numbers"),
        ({"0": 1, "x": 1}, "unknown"),
    ],
)
def test_bad_weights_are_named(weights, named):
    with pytest.raises(sk.ConfigError, match=named):
        sk.mix(sources(), weights)
    mix = sk.mix(sources())
    with pytest.raises(sk.ConfigError, match=named):
        mix.set_weights(weights)


@pytest.mark.parametrize(
    ("schedule", "match"),
    [
        ([(0, [1, 1, 1]), (50, [1, 0, 0]), (20, [0, 1, 0])], "increasing.*20 follows 50"),
        ([(0, [1, 1, 1]), (0, [1, 0, 0])], "increasing"),
        ([(10, [1, 1, 1])], "start at record 0"),
        ([(0, [1, 1])], "one weight per source"),
        ([(-1, [1, 1, 1])], "ints >= 0"),
        ([], "empty"),
        ("soon", "list of"),
    ],
)
def test_bad_schedules(schedule, match):
    with pytest.raises(sk.ConfigError, match=match):
        sk.mix(sources(), schedule=schedule)


def test_schedule_and_weights_and_set_weights_do_not_mix():
    with pytest.raises(sk.ConfigError, match="not both"):
        sk.mix(sources(), [1, 1, 1], schedule=[(0, [1, 1, 1])])
    with pytest.raises(sk.ConfigError, match="follows its schedule"):
        sk.mix(sources(), schedule=[(0, [1, 1, 1])]).set_weights([1, 0, 0])


def test_bad_rule_and_arguments():
    with pytest.raises(sk.ConfigError, match="on_exhausted"):
        sk.mix(sources(), on_exhausted="cycle")
    with pytest.raises(sk.ConfigError, match="num_samples"):
        sk.mix(sources(), num_samples=0)
    with pytest.raises(sk.ConfigError, match="at least one"):
        sk.mix([])
    with pytest.raises(sk.ConfigError, match="from_sequence"):
        sk.mix([(1, 2)])
    with pytest.raises(sk.ConfigError, match="both"):
        sk.mix([sk.range(3), sk.from_iterable(lambda: range(3))])


def test_a_state_of_another_mixture_is_refused_naming_the_difference():
    loader = sk.DataLoader(sk.mix(sources()), batch_size=10)
    it = iter(loader)
    next(it)
    state = json.loads(json.dumps(it.state_dict()))
    others = {
        "source_lens": sk.mix(sources((600, 401, 299))),
        "sources": sk.mix(dict(zip("abc", sources(), strict=True))),
        "dataset_len": sk.mix(sources((600, 400))),
        "on_exhausted": sk.mix(sources(), on_exhausted="drop"),
    }
    for field, other in others.items():
        with pytest.raises(sk.StateError, match=field):
            sk.DataLoader(other, batch_size=10).iter(state=state)
    damaged = json.loads(json.dumps(state))
    damaged["sampler"]["weights"] = [[0, [1.0, 0.0]]]
    with pytest.raises(sk.StateError, match="weight changes"):
        loader.iter(state=damaged)


def test_a_mixture_cannot_be_reordered_by_index_or_given_a_sampler():
    with pytest.raises(sk.NotSupportedError, match="shuffle=True"):
        sk.DataLoader(sk.mix(sources()).shuffle(seed=0), batch_size=4)
    with pytest.raises(sk.ConfigError, match="sampler="):
        sk.DataLoader(sk.mix(sources()), batch_size=4, sampler=range(10))


@pytest.mark.parametrize("combine", [sk.concat, sk.mix, lambda parts: sk.zip(*parts)])
def test_a_mixture_inside_concat_zip_or_mix_is_refused(combine):
    with pytest.raises(sk.ConfigError, match=r"one sk\.mix"):
        combine([sk.mix(sources()).map(lambda x: x), sk.range(3)])


def test_direct_indexing_reads_the_sources_one_after_the_other():
    ds = sk.mix([sk.from_sequence("ab"), sk.range(3)])
    assert len(ds) == 5
    assert [ds[i] for i in range(5)] == ["a", "b", 0, 1, 2]
