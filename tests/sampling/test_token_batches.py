"""TokenBatchSampler: budgets, every record once, determinism, hosts and elastic resume."""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly

N = 600
LENGTHS = np.random.default_rng(7).integers(1, 120, N)
LENGTHS[[5, 17]] = [500, 700]  # two records over the budget on their own
BUDGET = 400


def _sampler(**kwargs: Any) -> sk.TokenBatchSampler:
    return sk.TokenBatchSampler(LENGTHS, kwargs.pop("max_tokens", BUDGET), **kwargs)


def _loader(sampler: sk.TokenBatchSampler, hosts: int = 1, host: int = 0, **kw: Any) -> Any:
    shard = sk.Shard(host, hosts) if hosts > 1 else None
    return sk.DataLoader(
        sk.range(0, N), batch_sampler=sampler, shard=shard, collate_fn=list, seed=3, **kw
    )


@pytest.mark.parametrize("cost", ["padded", "tokens", "callable"])
def test_every_record_once_per_epoch_within_the_budget(cost: str) -> None:
    fn: Any = cost
    if cost == "callable":

        def fn(lengths: list[int]) -> float:  # attention-like: L + L^2 / 64
            return sum(n + n * n / 64 for n in lengths)

    sampler = _sampler(cost=fn, seed=1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert sorted(i for b in batches for i in b) == list(range(N))
        for batch in batches:
            if len(batch) > 1:
                assert sampler.cost_of(batch) <= BUDGET, (epoch, batch)
        assert [5] in batches
        assert [17] in batches


def test_padded_batches_are_tight() -> None:
    sampler = _sampler(seed=0)
    batches = list(sampler)
    real = sum(int(LENGTHS[b].sum()) for b in batches)
    padded = sum(len(b) * int(LENGTHS[b].max()) for b in batches)
    assert real / padded > 0.85


def test_deterministic_by_seed_and_epoch_and_new_each_epoch() -> None:
    a, b, c = _sampler(seed=4), _sampler(seed=4), _sampler(seed=5)
    assert list(a) == list(b)
    assert list(a) != list(c)
    a.set_epoch(1)
    b.set_epoch(0)
    assert list(a) != list(b)


def test_unshuffled_plan_is_fixed() -> None:
    sampler = _sampler(shuffle=False)
    first = list(sampler)
    sampler.set_epoch(5)
    assert list(sampler) == first


def test_the_loader_seed_is_used_when_the_sampler_has_none() -> None:
    sampler = _sampler()
    got = list(_loader(sampler))
    again = sk.DataLoader(sk.range(0, N), batch_sampler=_sampler(), collate_fn=list, seed=4)
    assert got != list(again)
    assert sorted(i for b in got for i in b) == list(range(N))


@pytest.mark.parametrize("hosts", [2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_every_host_gets_the_same_number_of_batches(hosts: int, drop_last: bool) -> None:
    sampler = _sampler(seed=2, drop_last=drop_last)
    loaders = [_loader(sampler, hosts, h) for h in range(hosts)]
    for _ in range(2):
        lens = [len(loader) for loader in loaders]
        runs = [list(loader) for loader in loaders]
        assert len({len(r) for r in runs}) == 1
        assert lens == [len(runs[0])] * hosts
        seen = sorted(i for r in runs for b in r for i in b)
        if not drop_last:
            assert seen == list(range(N))
        else:
            assert len(seen) == len(set(seen))
        # the batches of one step cost about the same: far closer than batches at random
        spread = [
            (max(c) - min(c)) / max(c)
            for c in ([sampler.cost_of(b) for b in step] for step in zip(*runs, strict=True))
        ]
        everything = [sampler.cost_of(b) for r in runs for b in r]
        assert np.median(spread) < 0.1 * (max(everything) - min(everything)) / max(everything)


def test_len_is_this_hosts_batches_of_the_epoch() -> None:
    sampler = _sampler(seed=2)
    loader = _loader(sampler, 3, 1)
    for _ in range(3):
        n = len(loader)
        assert n == len(list(loader))


@pytest.mark.parametrize(("workers", "mode"), [(0, "inline"), (2, "thread"), (2, "process")])
def test_resumes_exactly_at_every_step(workers: int, mode: str) -> None:
    loader = _loader(_sampler(seed=3, max_tokens=2000), num_workers=workers, worker_mode=mode)
    assert_resumes_exactly(loader, epochs=2, max_stops=None if workers == 0 else 12)


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1), (1, 2), (2, 2)])
def test_mid_epoch_resume_on_another_host_count_loses_and_repeats_nothing(
    before: int, after: int
) -> None:
    sampler = _sampler(seed=6)
    first = [iter(_loader(sampler, before, h)) for h in range(before)]
    seen: list[int] = []
    for _ in range(7):
        for it in first:
            seen += next(it)
    state = json.loads(json.dumps(first[0].state_dict()))
    assert len(json.dumps(state)) < 600  # small: no list of batches
    rest = [list(_loader(_sampler(seed=6), after, h).iter(state=state)) for h in range(after)]
    assert len({len(r) for r in rest}) == 1
    seen += [i for r in rest for b in r for i in b]
    assert sorted(seen) == list(range(N))
    # and the epoch after is the plain next epoch
    nxt = [_loader(_sampler(seed=6), after, h) for h in range(after)]
    following = [list(loader.iter(epoch=1)) for loader in nxt]
    assert sorted(i for r in following for b in r for i in b) == list(range(N))


def test_a_state_from_another_sampler_is_refused() -> None:
    it = iter(_loader(_sampler(seed=1)))
    next(it)
    state = it.state_dict()
    other = _loader(_sampler(seed=1, max_tokens=BUDGET + 1))
    with pytest.raises(sk.StateError, match="max_tokens"):
        list(other.iter(state=state))


def test_with_pad_collate_and_process_workers() -> None:
    ds = sk.from_sequence([np.arange(int(n)) for n in LENGTHS])
    collate = functools.partial(sk.pad_collate, multiple_of=8)
    loader = sk.DataLoader(
        ds,
        batch_sampler=_sampler(seed=0, max_tokens=1024),
        collate_fn=collate,
        num_workers=2,
        worker_mode="process",
    )
    with loader:
        total = 0
        for batch in loader:
            assert batch.shape[1] % 8 == 0
            if batch.shape[0] > 1:
                assert batch.shape[0] * batch.shape[1] <= 1024 + 8 * batch.shape[0]
            total += batch.shape[0]
    assert total == N


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"lengths": [1, -2]}, "lengths must be >= 0"),
        ({"lengths": [[1, 2]]}, "1-D"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"cost": "sum"}, "cost must be"),
        ({"window": 0}, "window"),
    ],
)
def test_bad_arguments_are_clear(bad: dict[str, Any], match: str) -> None:
    kwargs: dict[str, Any] = {"lengths": [1, 2, 3], "max_tokens": 10, **bad}
    with pytest.raises(sk.ConfigError, match=match):
        sk.TokenBatchSampler(kwargs.pop("lengths"), kwargs.pop("max_tokens"), **kwargs)


def test_too_few_records_for_the_hosts() -> None:
    sampler = sk.TokenBatchSampler([3, 4], max_tokens=100)
    loader = sk.DataLoader(
        sk.range(0, 2), batch_sampler=sampler, shard=sk.Shard(0, 3), collate_fn=list
    )
    with pytest.raises(sk.ConfigError, match="3 hosts"):
        list(loader)


def test_lengths_from_sources(tmp_path: Any) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [list(range(int(n))) for n in LENGTHS[:50]]
    table = pa.table({"tokens": rows, "text": ["x" * int(n) for n in LENGTHS[:50]]})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=16)
    expect = LENGTHS[:50].tolist()
    assert sk.from_arrow(table).lengths("tokens").tolist() == expect
    assert sk.from_arrow(table).lengths("text").tolist() == expect
    assert sk.from_parquet(tmp_path / "t.parquet").lengths("tokens").tolist() == expect
    mapped = sk.from_arrow(table).map(lambda r: r["tokens"][:10])
    assert mapped.lengths(len).tolist() == [min(n, 10) for n in expect]
    with pytest.raises(sk.ConfigError, match="no column 'nope'"):
        sk.from_parquet(tmp_path / "t.parquet").lengths("nope")
    with pytest.raises(sk.NotSupportedError, match="filtered"):
        sk.from_arrow(table).filter(bool).lengths("tokens")
