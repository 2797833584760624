"""Typical PyTorch DataLoader usages, run through PyTorch's loader and stoker's drop-in.

The batches must be exactly the same: structure and container types, tensor dtypes
and values. Where stoker cannot be the same by design, the test says what is
compared instead:

* With workers, PyTorch sends batch k to worker k % n; stoker sends it to the
  worker that is free. Each worker starts with the same seeds as PyTorch's (same
  base seed from the generator, same ``torch.initial_seed()``, NumPy and ``random``
  states), so each worker's stream of random draws is the same stream: the draws
  of one loader's worker are a prefix of the other's, whichever batches it built.
* ``shuffle=True`` is stoker's permutation (documented), so only the multiset of
  records is compared.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.utils.data as tud
from torch_helpers import (
    Bulk,
    Range,
    Records,
    Tuples,
    WholeRange,
    WorkerDraws,
    assert_same_batches,
    first_label,
    label_of,
    reseed_numpy,
    seed_from_torch,
    split_range,
)

import stoker as sk
import stoker.torch as skt


@pytest.fixture
def leaks_checked(request: pytest.FixtureRequest) -> Callable[[int], None]:
    """``leaks_checked(workers)``: the leak check of ``no_leaks`` when workers start."""

    def check(workers: int) -> None:
        if workers:
            request.getfixturevalue("no_leaks")

    return check


def _generator(seed: int = 3) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def both(make: Callable[[], dict[str, Any]], epochs: int = 1) -> tuple[list[Any], list[Any]]:
    """The batches of ``epochs`` epochs of each loader, built from fresh arguments."""
    torch_loader = tud.DataLoader(**make())
    expected = [batch for _ in range(epochs) for batch in torch_loader]
    with skt.DataLoader(**make()) as loader:
        got = [batch for _ in range(epochs) for batch in loader]
        assert _length(loader) == _length(torch_loader)
    return expected, got


def _length(loader: Any) -> int | None:
    try:
        return len(loader)
    except TypeError:  # an IterableDataset without __len__
        return None


MAP_CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "records": lambda: {"dataset": Records(), "batch_size": 4},
    "records-drop-last": lambda: {"dataset": Records(), "batch_size": 4, "drop_last": True},
    "records-unbatched": lambda: {"dataset": Records(5), "batch_size": None},
    "tuples": lambda: {"dataset": Tuples(), "batch_size": 3},
    "tensor-dataset": lambda: {
        "dataset": tud.TensorDataset(torch.arange(20.0).view(10, 2), torch.arange(10)),
        "batch_size": 4,
    },
    "list-of-ints": lambda: {"dataset": list(range(7)), "batch_size": 3},
    "bulk-getitems": lambda: {"dataset": Bulk(), "batch_size": 5},
    "custom-collate": lambda: {"dataset": Tuples(), "batch_size": 4, "collate_fn": first_label},
    "custom-collate-unbatched": lambda: {
        "dataset": Tuples(4),
        "batch_size": None,
        "collate_fn": label_of,
    },
    "sequential-sampler": lambda: {
        "dataset": Tuples(),
        "batch_size": 4,
        "sampler": tud.SequentialSampler(range(10)),
    },
    "subset-random-sampler": lambda: {
        "dataset": Records(),
        "batch_size": 4,
        "sampler": tud.SubsetRandomSampler([1, 3, 4, 7, 8, 10], generator=_generator()),
    },
    "weighted-sampler": lambda: {
        "dataset": Tuples(),
        "batch_size": 3,
        "sampler": tud.WeightedRandomSampler(
            [0.1 * (i + 1) for i in range(10)], num_samples=14, generator=_generator()
        ),
    },
    "random-sampler-with-generator": lambda: {
        "dataset": Tuples(),
        "batch_size": 4,
        "sampler": tud.RandomSampler(range(10), generator=_generator()),
    },
    "batch-sampler": lambda: {
        "dataset": Records(),
        "batch_sampler": tud.BatchSampler(
            tud.RandomSampler(range(11), generator=_generator()), 3, drop_last=False
        ),
    },
    "list-batch-sampler": lambda: {"dataset": Tuples(), "batch_sampler": [[3, 1], [0], [9, 8, 7]]},
}


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("case", list(MAP_CASES))
def test_map_style_batches_are_the_same(
    case: str, workers: int, leaks_checked: Callable[[int], None]
) -> None:
    leaks_checked(workers)
    make = MAP_CASES[case]
    expected, got = both(lambda: {**make(), "num_workers": workers}, epochs=2)
    assert_same_batches(expected, got)


def test_default_collate_shapes_are_pytorchs() -> None:
    (batch,) = list(skt.DataLoader(Records(3), batch_size=3))
    assert isinstance(batch["tuple"], list)  # a tuple record collates to a list ...
    assert batch["tuple"][1] == ("t0", "t1", "t2")  # ... whose string column is a tuple
    assert batch["str"] == ["record-0", "record-1", "record-2"]
    assert batch["pair"].label == ("p0", "p1", "p2")
    assert batch["int"].dtype == torch.int64
    assert batch["float"].dtype == torch.float64
    assert batch["bool"].dtype == torch.bool
    assert batch["np_scalar"].dtype == torch.float32
    assert batch["tensor"].shape == (3, 2, 3)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize(
    ("batch_size", "drop_last"), [(None, False), (1, False), (3, False), (3, True)]
)
def test_iterable_dataset_sharding_itself_with_worker_info(
    workers: int, batch_size: int | None, drop_last: bool, leaks_checked: Callable[[int], None]
) -> None:
    leaks_checked(workers)
    expected, got = both(
        lambda: {
            "dataset": Range(0, 17),
            "batch_size": batch_size,
            "drop_last": drop_last,
            "num_workers": workers,
        }
    )
    assert_same_batches(expected, got)


@pytest.mark.usefixtures("no_leaks")
def test_iterable_dataset_configured_by_worker_init_fn() -> None:
    expected, got = both(
        lambda: {
            "dataset": WholeRange(3, 20),
            "batch_size": 4,
            "num_workers": 2,
            "worker_init_fn": split_range,
        }
    )
    assert_same_batches(expected, got)
    assert sorted(x for b in got for x in b.tolist()) == list(range(3, 20))


@pytest.mark.usefixtures("no_leaks")
def test_an_iterable_dataset_that_does_not_shard_is_read_by_every_worker() -> None:
    # PyTorch documents the duplicates as the user's to avoid; the drop-in keeps them.
    expected, got = both(lambda: {"dataset": WholeRange(0, 5), "batch_size": 2, "num_workers": 2})
    assert_same_batches(expected, got)
    assert sorted(x for b in got for x in b.tolist()) == sorted(2 * list(range(5)))


def _draws_per_worker(batches: list[dict[str, Any]]) -> dict[int, list[tuple[Any, ...]]]:
    per: dict[int, list[tuple[Any, ...]]] = {}
    for batch in batches:
        for j in range(len(batch["index"])):
            row = tuple(
                batch[k][j].item()
                for k in ("numpy", "random", "torch", "seed", "initial_seed", "num_workers")
            )
            per.setdefault(int(batch["worker"][j]), []).append(row)
    return per


def _assert_same_streams(expected: list[Any], got: list[Any]) -> None:
    torch_draws, stoker_draws = _draws_per_worker(expected), _draws_per_worker(got)
    assert set(torch_draws) == {0, 1}
    for worker, draws in stoker_draws.items():
        theirs = torch_draws[worker]
        n = min(len(draws), len(theirs))
        assert n > 0
        assert draws[:n] == theirs[:n], f"worker {worker}"


def _worker_seeds(batches: list[Any]) -> set[tuple[int, int]]:
    return {
        (int(w), int(s))
        for b in batches
        for w, s in zip(b["worker"].tolist(), b["seed"].tolist(), strict=True)
    }


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize(
    "init", [None, reseed_numpy, seed_from_torch], ids=["none", "np.random.seed", "seed_worker"]
)
def test_worker_seeds_and_random_streams(init: Callable[[int], None] | None) -> None:
    def make() -> dict[str, Any]:
        return {
            "dataset": WorkerDraws(),
            "batch_size": 3,
            "num_workers": 2,
            "generator": _generator(5),
            "worker_init_fn": init,
        }

    torch_loader, loader = tud.DataLoader(**make()), skt.DataLoader(**make())
    with loader:
        for _ in range(2):  # a new iterator: new workers and a new base seed in both
            expected, got = list(torch_loader), list(loader)
            _assert_same_streams(expected, got)
            assert _worker_seeds(got) == _worker_seeds(expected)
            for b in got:
                assert b["own_dataset"].all()
                assert (b["threads"] == 1).all()
                assert (b["seed"] == b["initial_seed"]).all()
            assert sorted(int(i) for b in got for i in b["index"]) == list(range(24))


@pytest.mark.usefixtures("no_leaks")
def test_persistent_workers_keep_their_seeds_and_streams() -> None:
    def make() -> dict[str, Any]:
        return {
            "dataset": WorkerDraws(12),
            "batch_size": 3,
            "num_workers": 2,
            "generator": _generator(8),
            "persistent_workers": True,
        }

    expected, got = both(make, epochs=3)  # the streams go on across epochs
    _assert_same_streams(expected, got)


def test_global_rng_is_used_as_pytorch_uses_it() -> None:
    # Each iterator draws its base seed from the global RNG when there is no generator.
    torch.manual_seed(11)
    list(tud.DataLoader(Tuples(), batch_size=4))
    after_torch = torch.rand(3)
    torch.manual_seed(11)
    list(skt.DataLoader(Tuples(), batch_size=4))
    assert torch.equal(torch.rand(3), after_torch)


def test_shuffle_is_deterministic_from_the_generator_and_covers_every_record() -> None:
    def run(seed: int) -> list[list[int]]:
        loader = skt.DataLoader(Tuples(10), batch_size=3, shuffle=True, generator=_generator(seed))
        return [[int(y) for y in b[1]] for _ in range(2) for b in loader]

    first = run(1)
    assert first == run(1)
    assert first != run(2)
    assert first[:4] != first[4:]  # a new order every epoch
    assert sorted(x for b in first[:4] for x in b) == list(range(10))


def test_shuffle_without_generator_follows_torch_manual_seed() -> None:
    def run() -> list[int]:
        torch.manual_seed(4)
        loader = skt.DataLoader(Tuples(10), batch_size=10, shuffle=True)
        return [int(y) for y in next(iter(loader))[1]]

    assert run() == run()


@pytest.mark.usefixtures("no_leaks")
def test_in_order_false_yields_every_batch() -> None:
    loader = skt.DataLoader(Tuples(), batch_size=2, num_workers=2, in_order=False)
    with loader:
        labels = sorted(int(y) for _, ys in loader for y in ys)
    assert labels == list(range(10))


@pytest.mark.usefixtures("no_leaks")
def test_multiprocessing_context_sets_the_start_method() -> None:
    context = multiprocessing.get_context("forkserver")
    expected, got = both(
        lambda: {
            "dataset": Range(0, 6),
            "batch_size": 2,
            "num_workers": 1,
            "multiprocessing_context": context,
        }
    )
    assert_same_batches(expected, got)


def test_attributes_are_pytorchs() -> None:
    data = Tuples()
    loader = skt.DataLoader(data, batch_size=4, drop_last=True, num_workers=0)
    theirs = tud.DataLoader(data, batch_size=4, drop_last=True)
    assert loader.dataset is data
    assert (loader.batch_size, loader.drop_last) == (4, True)
    assert len(loader) == len(theirs) == 2
    assert isinstance(loader.batch_sampler, tud.BatchSampler)
    assert (loader.batch_sampler.batch_size, loader.batch_sampler.drop_last) == (4, True)
    assert list(loader.sampler) == list(theirs.sampler)
    assert loader.collate_fn is tud.default_collate
    assert loader.prefetch_factor is None
    assert loader.multiprocessing_context is None
    given = tud.BatchSampler(tud.SequentialSampler(data), 3, False)
    with_batches = skt.DataLoader(data, batch_sampler=given)
    assert with_batches.batch_sampler is given
    assert with_batches.batch_size is None
    assert len(with_batches) == 4
    assert skt.DataLoader(data, num_workers=2).prefetch_factor == 2
    with pytest.raises(ValueError, match="should not be set"):
        loader.batch_size = 8


def test_length_of_an_iterable_dataset_is_pytorchs() -> None:
    for drop_last in (False, True):
        loader = skt.DataLoader(WholeRange(0, 10), batch_size=4, drop_last=drop_last)
        assert len(loader) == len(
            tud.DataLoader(WholeRange(0, 10), batch_size=4, drop_last=drop_last)
        )
    with pytest.raises(TypeError):
        len(skt.DataLoader(Range(0, 10), batch_size=4))


BAD_ARGUMENTS: dict[str, dict[str, Any]] = {
    "negative-workers": {"dataset": Tuples(), "num_workers": -1},
    "negative-timeout": {"dataset": Tuples(), "timeout": -1},
    "prefetch-without-workers": {"dataset": Tuples(), "prefetch_factor": 2},
    "negative-prefetch": {"dataset": Tuples(), "num_workers": 1, "prefetch_factor": -1},
    "persistent-without-workers": {"dataset": Tuples(), "persistent_workers": True},
    "iterable-shuffle": {"dataset": Range(0, 4), "shuffle": True},
    "iterable-sampler": {"dataset": Range(0, 4), "sampler": [0, 1]},
    "iterable-batch-sampler": {"dataset": Range(0, 4), "batch_sampler": [[0, 1]]},
    "sampler-and-shuffle": {"dataset": Tuples(), "sampler": [0, 1], "shuffle": True},
    "batch-sampler-and-batch-size": {"dataset": Tuples(), "batch_sampler": [[0]], "batch_size": 2},
    "batch-sampler-and-shuffle": {"dataset": Tuples(), "batch_sampler": [[0]], "shuffle": True},
    "batch-sampler-and-sampler": {"dataset": Tuples(), "batch_sampler": [[0]], "sampler": [0]},
    "batch-sampler-and-drop-last": {"dataset": Tuples(), "batch_sampler": [[0]], "drop_last": True},
    "unbatched-drop-last": {"dataset": Tuples(), "batch_size": None, "drop_last": True},
    "context-without-workers": {"dataset": Tuples(), "multiprocessing_context": "spawn"},
    "unknown-start-method": {"dataset": Tuples(), "num_workers": 1, "multiprocessing_context": "x"},
}


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS))
def test_the_argument_errors_pytorch_raises(case: str) -> None:
    kwargs = BAD_ARGUMENTS[case]
    with pytest.raises(ValueError):  # noqa: PT011 - PyTorch's messages are its own
        tud.DataLoader(**kwargs)
    with pytest.raises(sk.ConfigError):
        skt.DataLoader(**kwargs)


def test_timeout_without_workers_is_refused_when_built() -> None:
    with pytest.raises(sk.ConfigError, match="timeout"):
        skt.DataLoader(Tuples(), timeout=5)


def test_a_context_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError):
        tud.DataLoader(Tuples(), num_workers=1, multiprocessing_context=3)
    with pytest.raises(TypeError, match="multiprocessing_context"):
        skt.DataLoader(Tuples(), num_workers=1, multiprocessing_context=3)


def test_pin_memory_without_cuda_warns_and_does_not_pin() -> None:
    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    with pytest.warns(UserWarning, match="pin_memory=True, but no CUDA"):
        loader = skt.DataLoader(Tuples(), batch_size=4, pin_memory=True)
    assert not any(x.is_pinned() for x, _ in loader)


def test_pytorchs_collate_functions_given_explicitly_are_the_defaults() -> None:
    expected, got = both(
        lambda: {"dataset": Records(6), "batch_size": 4, "collate_fn": tud.default_collate}
    )
    assert_same_batches(expected, got)
    expected, got = both(
        lambda: {"dataset": Records(3), "batch_size": None, "collate_fn": tud.default_convert}
    )
    assert_same_batches(expected, got)
    expected, got = both(  # default_convert on a whole batch: a list of converted records
        lambda: {"dataset": Tuples(4), "batch_size": 2, "collate_fn": tud.default_convert}
    )
    assert_same_batches(expected, got)
