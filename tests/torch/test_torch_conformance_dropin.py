"""PyTorch behaviours users rely on, through ``torch.utils.data.DataLoader`` and the drop-in.

Each case runs with 0 and 2 workers through both loaders and compares every batch:
``batch_size=None`` with a shuffle or a sampler, the workers' base seed in the state,
the stateful protocol, continuing after a dataset error, ``multiprocessing`` objects
in a dataset, a dataset that grows, and PyTorch's warnings and refusals.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.utils.data as tud
from dropin_helpers import (
    CountedStream,
    EpochCountingSampler,
    Failing,
    Growing,
    Indexed,
    SelfIterator,
    SharedCounter,
    ShuffledShards,
)
from torch.utils.data.distributed import DistributedSampler
from torch_helpers import WholeRange, assert_same_batches

import stoker.torch as skt

WORKERS = [0, 2]


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _both(make: Callable[[], dict[str, Any]], epochs: int = 1) -> tuple[list[Any], list[Any]]:
    theirs = tud.DataLoader(**make())
    expected = [b for _ in range(epochs) for b in theirs]
    with skt.DataLoader(**make()) as loader:
        got = [b for _ in range(epochs) for b in loader]
    return expected, got


# -- 1. batch_size=None honours shuffle and samplers -------------------------------------

UNBATCHED: dict[str, Callable[[], dict[str, Any]]] = {
    "sampler-list": lambda: {"dataset": Indexed(), "sampler": [6, 2]},
    "distributed": lambda: {
        "dataset": Indexed(),
        "sampler": DistributedSampler(Indexed(), num_replicas=2, rank=1, shuffle=False),
    },
    "distributed-shuffled": lambda: {
        "dataset": Indexed(),
        "sampler": DistributedSampler(Indexed(), num_replicas=2, rank=0, seed=4),
    },
    "index-lists": lambda: {"dataset": Indexed(), "sampler": [[1, 2], [3], [4, 5]]},
}


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("case", list(UNBATCHED))
def test_unbatched_samplers_are_honoured(case: str, workers: int) -> None:
    make = UNBATCHED[case]
    expected, got = _both(lambda: {**make(), "batch_size": None, "num_workers": workers}, 2)
    assert_same_batches(expected, got)
    assert len(skt.DataLoader(**make(), batch_size=None)) == len(expected) // 2


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("workers", WORKERS)
def test_unbatched_shuffle_shuffles_every_record(workers: int) -> None:
    # stoker's permutation is its own (documented): compare the records, not the order.
    expected, got = _both(
        lambda: {
            "dataset": Indexed(20),
            "batch_size": None,
            "shuffle": True,
            "num_workers": workers,
            "generator": _generator(),
        }
    )
    assert sorted(int(x) for x in got) == sorted(int(x) for x in expected) == list(range(20))
    assert [int(x) for x in got] != list(range(20))
    assert all(x.shape == () and x.dtype == torch.int64 for x in got)


# -- 2. the workers' base seed is in the state -------------------------------------------


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("workers", [1, 2])  # without workers, random is the caller's
def test_resuming_a_stream_shuffled_by_the_worker_seed_is_exact(workers: int) -> None:
    def make() -> skt.DataLoader[Any]:
        return skt.DataLoader(ShuffledShards(24), batch_size=3, num_workers=workers)

    with make() as loader:
        it = iter(loader)
        head = [next(it) for _ in range(3)]
        state = json.loads(json.dumps(it.state_dict()))
        tail = list(it)
    with make() as fresh:
        fresh.load_state_dict(state)
        resumed = list(fresh)
    assert_same_batches(tail, resumed)
    seen = sorted(int(x) for b in head + resumed for x in b)
    assert seen == list(range(24))
    # The batches themselves are PyTorch's for the same base seed.
    torch.manual_seed(5)
    expected = list(tud.DataLoader(ShuffledShards(24), batch_size=3, num_workers=workers))
    torch.manual_seed(5)
    with make() as loader:
        assert_same_batches(expected, list(loader))


# -- 3. the stateful protocol -------------------------------------------------------------


def _resume_after(make: Callable[[], Any], k: int) -> tuple[list[Any], list[Any], list[Any]]:
    """The batches after batch ``k`` of one pass, then those of the same loader and of
    a fresh one, each resumed there."""
    with make() as loader:
        it = iter(loader)
        for _ in range(k):
            next(it)
        state = json.loads(json.dumps(loader.state_dict()))
        rest = list(it)
        loader.load_state_dict(state)
        again = list(loader)
    with make() as fresh:
        fresh.load_state_dict(state)
        return rest, again, list(fresh)


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("dataset", [CountedStream, SelfIterator])
def test_a_stateful_stream_is_asked_for_its_state(dataset: type, workers: int) -> None:
    expected, got = _both(lambda: {"dataset": dataset(9), "batch_size": 2, "num_workers": 0})
    assert_same_batches(expected, got)
    rest, again, resumed = _resume_after(
        lambda: skt.DataLoader(dataset(9), batch_size=2, num_workers=workers), 2
    )
    assert rest  # not an empty epoch
    assert_same_batches(rest, again)
    assert_same_batches(rest, resumed)


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("workers", WORKERS)
def test_a_stateful_sampler_is_asked_for_its_state(workers: int) -> None:
    def make() -> dict[str, Any]:
        return {"dataset": Indexed(7), "batch_size": 2, "sampler": EpochCountingSampler(7)}

    expected, got = _both(lambda: {**make(), "num_workers": workers}, epochs=3)
    assert_same_batches(expected, got)
    # Resumed in a fresh loader in the second epoch: the sampler's own state comes back.
    sampler = EpochCountingSampler(7)
    with skt.DataLoader(Indexed(7), batch_size=2, sampler=sampler, num_workers=workers) as one:
        list(one)
        it = iter(one)
        next(it)
        state = json.loads(json.dumps(it.state_dict()))
        rest = list(it)
    with skt.DataLoader(
        Indexed(7), batch_size=2, sampler=EpochCountingSampler(7), num_workers=workers
    ) as fresh:
        fresh.load_state_dict(state)
        assert_same_batches(rest, list(fresh))


# -- 4. an exception in one batch does not end the pass -----------------------------------


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("workers", WORKERS)
def test_a_dataset_error_skips_only_its_batch(workers: int) -> None:
    def run(loader: Any) -> list[Any]:
        out: list[Any] = []
        it = iter(loader)
        while True:
            try:
                out.append(next(it))
            except ValueError as exc:  # PyTorch's workers add words of their own
                out.append(f"error: {'bad record 3' in str(exc)}")
            except StopIteration:
                return out

    expected = run(tud.DataLoader(Failing(10, 3), batch_size=2, num_workers=workers))
    with skt.DataLoader(Failing(10, 3), batch_size=2, num_workers=workers) as loader:
        got = run(loader)
    assert expected[1] == got[1] == "error: True"
    assert_same_batches(expected[:1] + expected[2:], got[:1] + got[2:])


# -- 5. multiprocessing objects in a dataset ----------------------------------------------


# No leak check: the first Value opens multiprocessing's shared heap for good.
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_dataset_holding_multiprocessing_objects_works(method: str) -> None:
    ctx = multiprocessing.get_context(method)
    for loader_class in (tud.DataLoader, skt.DataLoader):
        data = SharedCounter(ctx, 8)
        loader = loader_class(data, batch_size=2, num_workers=2, multiprocessing_context=ctx)
        assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5], [6, 7]]
        assert data.count.value == 8, loader_class
        if isinstance(loader, skt.DataLoader):
            loader.close()


# -- 6. the dataset's length is read per epoch --------------------------------------------


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("kind", ["sequential", "shuffle", "unbatched"])
def test_a_dataset_that_grows_is_read_whole_every_epoch(kind: str, workers: int) -> None:
    def run(loader_class: Any) -> list[tuple[int, list[int]]]:
        data = Growing(5)
        options: dict[str, Any] = {"batch_size": None if kind == "unbatched" else 2}
        if kind == "shuffle":
            options["shuffle"] = True
        loader = loader_class(data, num_workers=workers, **options)
        seen = []
        for _ in range(2):
            seen.append(
                (len(loader), sorted(int(x) for b in loader for x in torch.as_tensor(b).view(-1)))
            )
            data.items.extend([len(data.items), len(data.items) + 1])
        if isinstance(loader, skt.DataLoader):
            loader.close()
        return seen

    assert run(skt.DataLoader) == run(tud.DataLoader)


# -- 7. PyTorch's warnings and refusals ---------------------------------------------------


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # PyTorch's __del__
def test_more_workers_than_cpus_warns_when_built_and_iterated_as_torch_does() -> None:
    many = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1) + 1
    for loader_class in (tud.DataLoader, skt.DataLoader):
        with pytest.warns(UserWarning, match="worker processes in total"):
            loader = loader_class(Indexed(4), batch_size=2, num_workers=many)
        with pytest.warns(UserWarning, match="worker processes in total"):
            it = iter(loader)
        assert len(list(it)) == 2
        if isinstance(loader, skt.DataLoader):
            loader.close()


@pytest.mark.parametrize("workers", WORKERS)
def test_an_iterable_dataset_longer_than_its_length_warns(workers: int) -> None:
    class Longer(WholeRange):
        def __len__(self) -> int:
            return 3

    for loader_class in (tud.DataLoader, skt.DataLoader):
        loader = loader_class(Longer(0, 5), batch_size=None, num_workers=min(workers, 1))
        assert len(loader) == 3
        with pytest.warns(UserWarning, match="was reported to be 3"):
            assert [int(x) for x in loader] == [0, 1, 2, 3, 4]
        if isinstance(loader, skt.DataLoader):
            loader.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # PyTorch's __del__
def test_prefetch_factor_zero_with_workers_is_refused() -> None:
    with pytest.raises(AssertionError):
        iter(tud.DataLoader(Indexed(), num_workers=1, prefetch_factor=0))
    with pytest.raises(ValueError, match="prefetch_factor"):
        skt.DataLoader(Indexed(), num_workers=1, prefetch_factor=0)


def test_a_multiprocessing_context_of_the_wrong_type_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        tud.DataLoader(Indexed(), num_workers=1, multiprocessing_context=3)
    with pytest.raises(TypeError, match="multiprocessing_context"):
        skt.DataLoader(Indexed(), num_workers=1, multiprocessing_context=3)
