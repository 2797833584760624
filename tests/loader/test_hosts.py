"""shard=: each host loads its even slice of every global batch; states move across host counts.

These tests run the hosts side by side in one process (sk.Shard(i, n) names the host);
tests/distributed/ runs them as real processes under jax.distributed and torch.distributed.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import stoker as sk

WHOLE = sk.Shard(0, 1)


def _data(n: int = 50) -> sk.Dataset[np.ndarray]:
    return sk.from_arrays(np.arange(n, dtype=np.int64))


def _global(loader: sk.DataLoader[np.ndarray], epochs: int) -> list[list[int]]:
    return [b.tolist() for _ in range(epochs) for b in loader]


def _expected_slices(global_batches: list[list[int]], hosts: int) -> list[list[list[int]]]:
    """Each global batch cut into `hosts` even slices; a remainder that does not split
    is dropped, and a batch smaller than the host count gives no step."""
    steps = []
    for g in global_batches:
        per = len(g) // hosts
        if per:
            steps.append([g[i * per : (i + 1) * per] for i in range(hosts)])
    return steps


@pytest.mark.parametrize("hosts", [2, 3, 4])
@pytest.mark.parametrize("last_batch", ["keep", "drop", "rollover"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_hosts_together_load_the_single_host_global_batches(
    hosts: int, last_batch: str, shuffle: bool
) -> None:
    b, epochs = 4, 3
    kw = {"shuffle": shuffle, "seed": 7, "last_batch": last_batch}
    single = sk.DataLoader(_data(), batch_size=b * hosts, **kw)  # type: ignore[arg-type]
    expected = _expected_slices(_global(single, epochs), hosts)
    per_host = [
        _global(sk.DataLoader(_data(), batch_size=b, shard=sk.Shard(i, hosts), **kw), epochs)  # type: ignore[arg-type]
        for i in range(hosts)
    ]
    steps = [list(step) for step in zip(*per_host, strict=True)]
    assert steps == expected
    seen = [x for step in steps for part in step for x in part]
    if last_batch != "rollover":  # each epoch: no record twice
        per_epoch = len(seen) // epochs
        for e in range(epochs):
            chunk = seen[e * per_epoch : (e + 1) * per_epoch]
            assert len(set(chunk)) == len(chunk)


def test_the_remainder_is_split_evenly_under_keep() -> None:
    # 50 records, global batch 3 x 4 = 12: four full steps, then 2 records left,
    # which is less than one per host under keep: dropped.
    loaders = [sk.DataLoader(_data(), batch_size=4, shard=sk.Shard(i, 3)) for i in range(3)]
    lens = {len(loader) for loader in loaders}
    assert lens == {4}
    assert [len(list(loader)) for loader in loaders] == [4, 4, 4]
    # 50 records, global batch 2 x 8 = 16: three full steps; 2 records split 1 + 1.
    loaders = [sk.DataLoader(_data(), batch_size=8, shard=sk.Shard(i, 2)) for i in range(2)]
    last = [list(loader)[-1].tolist() for loader in loaders]
    assert last == [[48], [49]]
    assert len(loaders[0]) == 4


@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 2), (2, 4), (4, 2), (3, 1)])
def test_a_state_saved_on_n_hosts_resumes_on_m_hosts(before: int, after: int) -> None:
    global_batch, stop_after = 12, 2
    kw = {"shuffle": True, "seed": 3, "last_batch": "drop"}

    def loader(index: int, count: int) -> sk.DataLoader[np.ndarray]:
        return sk.DataLoader(
            _data(100), batch_size=global_batch // count, shard=sk.Shard(index, count), **kw
        )  # type: ignore[arg-type]

    its = [iter(loader(i, before)) for i in range(before)]
    for it in its:
        for _ in range(stop_after):
            next(it)
    states = [json.dumps(it.state_dict()) for it in its]
    assert len(set(states)) == 1  # the state is the same on every host
    state = json.loads(states[0])

    resumed = [[b.tolist() for b in loader(i, after).iter(state=state)] for i in range(after)]
    glued = [[x for part in step for x in part] for step in zip(*resumed, strict=True)]
    single = sk.DataLoader(_data(100), batch_size=global_batch, **kw)  # type: ignore[arg-type]
    assert glued == [b.tolist() for b in single.iter(epoch=0)][stop_after:]


def test_a_state_from_another_global_batch_size_is_refused() -> None:
    it = iter(sk.DataLoader(_data(), batch_size=4, shard=sk.Shard(0, 2)))
    next(it)
    with pytest.raises(sk.StateError, match=r"batch_size=8.*host"):
        sk.DataLoader(_data(), batch_size=4).iter(state=it.state_dict())


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_workers_load_the_same_host_slices(mode: str, no_leaks: None) -> None:
    kw = {"shuffle": True, "seed": 1, "last_batch": "keep"}
    inline = [
        _global(sk.DataLoader(_data(), batch_size=3, shard=sk.Shard(i, 2), **kw), 2)  # type: ignore[arg-type]
        for i in range(2)
    ]
    for i in range(2):
        with sk.DataLoader(
            _data(),
            batch_size=3,
            shard=sk.Shard(i, 2),
            num_workers=2,
            worker_mode=mode,  # type: ignore[arg-type]
            **kw,  # type: ignore[arg-type]
        ) as loader:
            assert _global(loader, 2) == inline[i]


def test_a_batch_sampler_gives_each_host_its_even_slice() -> None:
    batches = [[0, 1, 2, 3, 4], [5, 6, 7, 8], [9], [10, 11, 12]]
    per_host = [
        [b.tolist() for b in sk.DataLoader(_data(), batch_sampler=batches, shard=sk.Shard(i, 2))]
        for i in range(2)
    ]
    assert per_host == [[[0, 1], [5, 6], [10]], [[2, 3], [7, 8], [11]]]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stream_is_split_across_hosts_and_their_workers(num_workers: int) -> None:
    def numbers(shard: sk.Shard = WHOLE) -> range:
        return range(shard.index, 40, shard.count)

    records = []
    for i in range(2):
        loader = sk.DataLoader(
            sk.from_iterable(numbers),
            batch_size=5,
            shard=sk.Shard(i, 2),
            num_workers=num_workers,
            worker_mode="thread" if num_workers else "auto",
        )
        with loader:
            records += [x for b in loader for x in b.tolist()]
    assert sorted(records) == list(range(40))


def test_a_stream_state_belongs_to_its_host() -> None:
    def loader(i: int) -> sk.DataLoader[np.ndarray]:
        ds = sk.from_iterable(lambda: iter(range(40)))
        return sk.DataLoader(ds, batch_size=4, shard=sk.Shard(i, 2))

    it = iter(loader(1))
    first = next(it).tolist()
    assert first == [1, 3, 5, 7]
    assert next(loader(1).iter(state=it.state_dict())).tolist() == [9, 11, 13, 15]
    with pytest.raises(sk.StateError, match="host"):
        loader(0).iter(state=it.state_dict())


def test_bad_shard_settings_are_refused_early() -> None:
    host = sk.Shard(0, 2)
    with pytest.raises(sk.ConfigError, match="ordered=False"):
        sk.DataLoader(_data(), batch_size=2, shard=host, ordered=False)
    with pytest.raises(sk.NotSupportedError, match="filter"):
        sk.DataLoader(_data().filter(lambda x: x % 2 == 0), batch_size=2, shard=host)
    with pytest.raises(sk.NotSupportedError, match="filter"):
        sk.DataLoader(_data(), batch_size=2, shard=host, on_error="skip")
    with pytest.raises(sk.ConfigError, match="batch_size"):
        sk.DataLoader(_data(), batch_size=None, shard=host)
    with pytest.raises(sk.ConfigError, match="shard must be"):
        sk.DataLoader(_data(), batch_size=2, shard="mpi")
    with pytest.raises(sk.ConfigError, match="Shard index"):
        sk.Shard(2, 2)


def test_shard_torch_without_an_initialised_process_group_says_so() -> None:
    pytest.importorskip("torch")
    with pytest.raises(sk.ConfigError, match="init_process_group"):
        sk.DataLoader(_data(), batch_size=2, shard="torch")


def test_a_distributed_sampler_with_shard_is_refused() -> None:
    torch_data = pytest.importorskip("torch.utils.data")
    sampler = torch_data.DistributedSampler(range(50), num_replicas=2, rank=0, shuffle=False)
    with pytest.raises(sk.ConfigError, match="DistributedSampler"):
        sk.DataLoader(_data(), batch_size=2, sampler=sampler, shard=sk.Shard(0, 2))


def test_shard_jax_on_one_process_is_the_whole_data() -> None:
    pytest.importorskip("jax")
    loader = sk.DataLoader(_data(10), batch_size=4, shard="jax")
    assert loader.shard == sk.Shard(0, 1)
    assert loader.global_batch_size == 4
    assert next(iter(loader)).tolist() == [0, 1, 2, 3]
