"""torchdata's ``Stateful`` protocol, whole: each case resumed by the drop-in equals
torchdata's ``StatefulDataLoader`` resumed the same way (and the uninterrupted run),
with 0 and 2 workers; ``stoker.DataLoader`` resumes the same cases of its own streams
and samplers as its uninterrupted run does.

A state is taken in the middle of a pass, at its start, or after it ran to its end
(the epoch boundary), loaded into a fresh loader (through JSON for stoker), and the
batches that follow are compared.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset, IterableDataset, Sampler, get_worker_info

import stoker as sk
from stoker.torch import DataLoader

stateful_dataloader = pytest.importorskip("torchdata.stateful_dataloader")
StatefulDataLoader = stateful_dataloader.StatefulDataLoader

# torchdata 0.11's StatefulDataLoader calls torch.set_vital, which torch 2.13 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")

Cut = tuple[int, int | None]  # (pass, batches taken in it); None: after the pass ended


def _worker() -> tuple[int, int]:
    info = get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)


class Counting(IterableDataset):  # type: ignore[type-arg]
    """Keeps its own position (it skips to it itself) and counts its passes."""

    def __init__(self, n: int) -> None:
        self.n, self.pos, self.epoch = n, 0, 0
        self.resume: int | None = None

    def __iter__(self) -> Iterator[tuple[int, int]]:
        k, m = _worker()
        self.pos, self.resume = self.resume or 0, None
        for x in list(range(k, self.n, m))[self.pos :]:
            self.pos += 1
            yield x, self.epoch
        self.pos, self.epoch = 0, self.epoch + 1  # the state at the end opens the next pass

    def state_dict(self) -> dict[str, Any]:
        return {"pos": self.pos, "epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.resume, self.epoch = state["pos"], state["epoch"]


class SelfIterating(IterableDataset):  # type: ignore[type-arg]
    """Its own iterator: ``__iter__`` starts a pass over this worker's records."""

    def __init__(self, n: int) -> None:
        self.n, self.i = n, 0
        self.items: list[int] = []

    def __iter__(self) -> SelfIterating:
        k, m = _worker()
        self.items, self.i = list(range(k, self.n, m)), 0
        return self

    def __next__(self) -> int:
        if self.i >= len(self.items):
            raise StopIteration
        self.i += 1
        return self.items[self.i - 1] * 10

    def state_dict(self) -> dict[str, Any]:
        return {"i": self.i}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.i = state["i"]


class Draws:
    """An iterator drawing from the process's torch RNG; its state holds that RNG."""

    def __init__(self, n: int) -> None:
        self.n, self.i = n, 0

    def __iter__(self) -> Draws:
        return self

    def __next__(self) -> int:
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return int(torch.randint(1000, ()).item())

    def state_dict(self) -> dict[str, Any]:
        return {"i": self.i, "rng": torch.get_rng_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.i = state["i"]
        torch.set_rng_state(state["rng"])


class DrawingStream(IterableDataset):  # type: ignore[type-arg]
    """Not stateful itself; its iterator is (torchdata's fetcher state)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Draws:
        return Draws(self.n // _worker()[1])


class Unsaved(IterableDataset):  # type: ignore[type-arg]
    """Draws from the worker's torch RNG and keeps no state: resumed by reading again."""

    def __iter__(self) -> Iterator[int]:
        return (int(torch.randint(1000, ()).item()) for _ in range(6))


class MapDraws(Dataset):  # type: ignore[type-arg]
    """A map-style dataset drawing from the process's torch RNG, which its state holds."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> tuple[int, int]:
        return i, int(torch.randint(1000, ()).item())

    def state_dict(self) -> dict[str, Any]:
        return {"rng": torch.get_rng_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        torch.set_rng_state(state["rng"])


class Positioned(Sampler[int]):
    """A sampler that keeps its own position and whose order follows the passes it made."""

    def __init__(self, n: int) -> None:
        self.n, self.pos, self.epoch = n, 0, 0
        self.resume: int | None = None

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        self.pos, self.resume = self.resume or 0, None
        for i in range(self.pos, self.n):
            self.pos += 1
            yield (i + 3 * self.epoch) % self.n
        self.pos, self.epoch = 0, self.epoch + 1

    def state_dict(self) -> dict[str, Any]:
        return {"pos": self.pos, "epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.resume, self.epoch = state["pos"], state["epoch"]


class Squares(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> int:
        return i * i


def plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor | np.ndarray):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def close(loader: Any) -> None:
    if isinstance(loader, DataLoader | sk.DataLoader):
        loader.close()


def passes(make: Callable[[], Any], count: int) -> list[list[Any]]:
    loader = make()
    try:
        return [plain(list(loader)) for _ in range(count)]
    finally:
        close(loader)


def resumed(make: Callable[[], Any], cut: Cut, count: int, reseed: bool = False) -> list[list[Any]]:
    """The passes after the state taken at ``cut``, read by a fresh loader (built after
    seeding torch's RNG as for the first with ``reseed``)."""
    at, taken = cut
    loader = make()
    for _ in range(at):
        list(loader)
    it = iter(loader)
    if taken is None:
        list(it)
    else:
        for _ in range(taken):
            next(it)
    state = loader.state_dict()
    del it
    close(loader)
    if not isinstance(loader, StatefulDataLoader):
        state = json.loads(json.dumps(state))
    if reseed:
        torch.manual_seed(0)
    fresh = make()
    try:
        fresh.load_state_dict(state)
        left = count - at - (1 if taken is None else 0)
        return [plain(list(fresh)) for _ in range(left)]
    finally:
        close(fresh)


def expected(whole: list[list[Any]], cut: Cut) -> list[list[Any]]:
    at, taken = cut
    if taken is None:
        return whole[at + 1 :]
    return [whole[at][taken:], *whole[at + 1 :]]


def same_as_torchdata(
    make: Callable[[type], Any],
    cuts: list[Cut],
    count: int = 2,
    *,
    ours_only: Cut | None = None,
    reseed: bool = False,
) -> list[list[Any]]:
    """Resumes ``make(DataLoader)`` and ``make(StatefulDataLoader)`` at each cut; both
    must give the batches of the uninterrupted run. Returns that run.

    At ``ours_only``, torchdata's resume departs from its own uninterrupted run (see
    docs/migrating.md); there the drop-in is held to the uninterrupted run alone.
    ``reseed``: torch's RNG is seeded again before a resumed loader is built, for a
    sampler that draws its seed from it (no state keeps that seed).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        whole = passes(lambda: make(DataLoader), count)
        torch.manual_seed(0)
        assert passes(lambda: make(StatefulDataLoader), count) == whole
        for cut in [*cuts, *([ours_only] if ours_only else [])]:
            torch.manual_seed(0)
            ours = resumed(lambda: make(DataLoader), cut, count, reseed)
            assert ours == expected(whole, cut), cut
            if cut != ours_only:
                torch.manual_seed(0)
                theirs = resumed(lambda: make(StatefulDataLoader), cut, count, reseed)
                assert theirs == ours, cut
    return whole


def seeded(seed: int = 7) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stream_that_counts_its_epochs_resumes_at_every_position(workers: int) -> None:
    def make(cls: type) -> Any:
        return cls(
            Counting(12),
            batch_size=2,
            num_workers=workers,
            persistent_workers=workers > 0,
            generator=seeded(),
        )

    whole = same_as_torchdata(make, [(0, 0), (0, 2), (0, None), (1, 1)])
    assert {e for batch in whole[1] for e in batch[1]} == {1}  # the second pass counts 1


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataset_that_is_its_own_iterator_resumes_where_it_stood(workers: int) -> None:
    def make(cls: type) -> Any:
        return cls(SelfIterating(10), batch_size=3, num_workers=workers, generator=seeded())

    same_as_torchdata(make, [(0, 1), (0, None), (1, 2)])


@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterator_that_keeps_the_rng_resumes_its_draws(workers: int) -> None:
    # Without workers, the draws come from the main process's RNG, which the
    # iterator's state holds; with workers, from each worker's, seeded from the
    # base seed.
    def make(cls: type) -> Any:
        return cls(DrawingStream(12), batch_size=2, num_workers=workers, generator=seeded())

    same_as_torchdata(make, [(0, 0), (0, 2), (0, None)])


def test_the_workers_base_seed_resumes_a_stream_without_state() -> None:
    def make(cls: type) -> Any:
        return cls(Unsaved(), batch_size=2, num_workers=2, generator=seeded())

    same_as_torchdata(make, [(0, 0), (0, 3)], count=1)


@pytest.mark.parametrize("shuffled", [False, True])
def test_a_map_dataset_that_keeps_the_main_process_rng_resumes(shuffled: bool) -> None:
    # shuffled: PyTorch's RandomSampler draws its seed from the same RNG as the pass
    # starts, before the dataset is given its state back.
    def make(cls: type) -> Any:
        dataset = MapDraws()
        sampler = torch.utils.data.RandomSampler(dataset) if shuffled else None
        return cls(dataset, batch_size=3, sampler=sampler, generator=seeded())

    same_as_torchdata(make, [(0, 0), (0, 1), (0, None)], reseed=shuffled)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_sampler_with_its_own_state_resumes_at_every_position(workers: int) -> None:
    def make(cls: type) -> Any:
        return cls(
            Squares(), batch_size=3, sampler=Positioned(10), num_workers=workers, generator=seeded()
        )

    # With workers, torchdata's iterator restored at the end of a pass reads the
    # sampler ahead before it is replaced, so its next pass is one epoch further on.
    odd: Cut | None = (0, None) if workers else None
    cuts = [cut for cut in [(0, 1), (0, None), (1, 2)] if cut != odd]
    whole = same_as_torchdata(make, cuts, ours_only=odd)
    assert whole[1][0] == [9, 16, 25]  # the second pass starts 3 further on


# -- stoker.DataLoader: its own streams and samplers ---------------------------------


class CountingStream(sk.IterDataset[list[int]]):
    """A stoker stream with state of its own: its position and the passes it made."""

    def __init__(self, n: int) -> None:
        self.n, self.pos, self.epoch = n, 0, 0
        self.resume: int | None = None

    def __iter__(self) -> Iterator[list[int]]:
        self.pos, self.resume = self.resume or 0, None
        for x in range(self.pos, self.n):
            self.pos += 1
            yield [x, self.epoch]
        self.pos, self.epoch = 0, self.epoch + 1

    def state_dict(self) -> dict[str, Any]:
        return {"pos": self.pos, "epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.resume, self.epoch = state["pos"], state["epoch"]


class SelfIteratingStream(sk.IterDataset[int]):
    def __init__(self, n: int) -> None:
        self.n, self.i = n, 0

    def __iter__(self) -> SelfIteratingStream:
        return self

    def __next__(self) -> int:
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i * 10

    def state_dict(self) -> dict[str, Any]:
        return {"i": self.i}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.i = state["i"]


def processes(workers: int) -> dict[str, Any]:
    """Process workers started by fork (quick to start), or none."""
    if not workers:
        return {}
    return {"num_workers": workers, "worker_mode": "process", "start_method": "fork"}


def same_as_uninterrupted(make: Callable[[], Any], cuts: list[Cut], count: int = 2) -> Any:
    whole = passes(make, count)
    for cut in cuts:
        assert resumed(make, cut, count) == expected(whole, cut), cut
    return whole


@pytest.mark.parametrize("workers", [0, 2])
def test_stoker_streams_with_their_own_state_resume_at_every_position(workers: int) -> None:
    def counting() -> sk.DataLoader[Any]:
        return sk.DataLoader(CountingStream(9), batch_size=2, **processes(workers))

    whole = same_as_uninterrupted(counting, [(0, 0), (0, 2), (0, None), (1, 1)])
    assert {e for _, epochs in whole[1] for e in epochs} == {1}  # the second pass counts 1

    def own_iterator() -> sk.DataLoader[Any]:
        return sk.DataLoader(SelfIteratingStream(7), batch_size=2, **processes(workers))

    whole = same_as_uninterrupted(own_iterator, [(0, 1), (0, None)])
    assert whole[1] == []  # it stays exhausted, as the same object does in PyTorch


@pytest.mark.parametrize("workers", [0, 2])
def test_stoker_resumes_a_sampler_with_its_own_state(workers: int) -> None:
    def make() -> sk.DataLoader[Any]:
        return sk.DataLoader(
            sk.range(0, 10), batch_size=3, sampler=Positioned(10), **processes(workers)
        )

    whole = same_as_uninterrupted(make, [(0, 1), (0, None), (1, 2)])
    assert whole[1][0] == [3, 4, 5]


# -- torch's warning for an IterableDataset longer than its __len__ ------------------


class Overlong(IterableDataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 3

    def __iter__(self) -> Iterator[int]:
        return iter(range(5))


@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterable_dataset_longer_than_its_len_warns_as_torch_does(workers: int) -> None:
    dataset = Overlong()

    def messages(cls: type) -> list[str]:
        loader = cls(dataset, batch_size=None, num_workers=workers)
        assert len(loader) == 3
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batches = list(loader)
        close(loader)
        assert len(batches) == 5 * max(1, workers)  # every worker reads it whole
        return [str(w.message) for w in caught if "Length of IterableDataset" in str(w.message)]

    ours = messages(DataLoader)
    assert ours == messages(torch.utils.data.DataLoader)
    assert len(ours) == 5 * max(1, workers) - 3
