"""The drop-in loader resumes exactly: ``state_dict()`` after batch k gives k+1, k+2, ..."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from torch_helpers import Range, Records, Tuples, assert_same_batches

import stoker as sk
import stoker.torch as skt


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(21)


def _resumed_at_every_step(make: Any, resume_workers: int) -> None:
    with make(None) as loader:
        expected = list(loader)
    for k in range(len(expected)):
        with make(None) as loader:
            it = iter(loader)
            for _ in range(k + 1):
                next(it)
            state = json.loads(json.dumps(it.state_dict()))
            it.close()
        with make(resume_workers) as fresh:
            fresh.load_state_dict(state)
            assert_same_batches(expected[k + 1 :], list(fresh))


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize(("workers", "resume_workers"), [(0, 0), (2, 0), (0, 2)])
def test_map_style_with_shuffle_resumes_exactly(workers: int, resume_workers: int) -> None:
    def make(w: int | None) -> skt.DataLoader[Any]:
        return skt.DataLoader(
            Records(13),
            batch_size=3,
            shuffle=True,
            generator=_generator(),
            num_workers=workers if w is None else w,
        )

    _resumed_at_every_step(make, resume_workers)


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterable_dataset_resumes_with_the_same_workers(workers: int) -> None:
    def make(w: int | None) -> skt.DataLoader[Any]:
        return skt.DataLoader(Range(0, 23), batch_size=4, num_workers=workers)

    _resumed_at_every_step(make, workers)


def test_loader_state_follows_epochs() -> None:
    loader = skt.DataLoader(Tuples(10), batch_size=4, shuffle=True, generator=_generator())
    assert loader.state_dict()["epoch"] == 0
    first = [y.tolist() for _, y in loader]
    state = loader.state_dict()
    assert (state["epoch"], state["batches"]) == (1, 0)
    second = [y.tolist() for _, y in loader]
    assert first != second
    other = skt.DataLoader(Tuples(10), batch_size=4, shuffle=True, generator=_generator())
    other.load_state_dict(state)
    assert [y.tolist() for _, y in other] == second


def test_a_state_of_another_loader_is_refused() -> None:
    state = skt.DataLoader(Tuples(10), batch_size=4).state_dict()
    with pytest.raises(sk.StateError):
        skt.DataLoader(Tuples(10), batch_size=5).load_state_dict(state)
    with pytest.raises(sk.StateError):
        skt.DataLoader(Tuples(12), batch_size=4).load_state_dict(state)


def test_iterators_report_length_and_stats() -> None:
    loader = skt.DataLoader(Tuples(10), batch_size=4)
    it = iter(loader)
    assert len(it) == 3
    next(it)
    assert it.stats().batches == 1
