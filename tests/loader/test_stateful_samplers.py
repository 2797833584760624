"""A user's sampler with ``state_dict()`` / ``load_state_dict()`` (torchdata's ``Stateful``)
is given back its state when a loader resumes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import stoker as sk


class EpochCounting:
    """Its order depends on how many epochs it has walked: its state."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.epochs = 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        shift, self.epochs = self.epochs, self.epochs + 1
        return iter([(i + 3 * shift) % self.n for i in range(self.n)])

    def state_dict(self) -> dict[str, Any]:
        return {"epochs": self.epochs}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epochs = state["epochs"]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_sampler_resumes_in_a_fresh_process(workers: int) -> None:
    def make() -> sk.DataLoader[Any]:
        return sk.DataLoader(
            sk.range(0, 7), batch_size=2, sampler=EpochCounting(7), num_workers=workers
        )

    with make() as loader:
        list(loader)  # epoch 0: the sampler counts one epoch
        it = iter(loader)
        next(it)
        state = json.loads(json.dumps(it.state_dict()))
        rest = [b.tolist() for b in it]
    with make() as fresh:
        assert [b.tolist() for b in fresh.iter(state=state)] == rest
    assert rest[0] == [5, 6]  # the second epoch's order (shifted by 3)


def test_each_epoch_iterates_a_stateful_sampler_once() -> None:
    sampler = EpochCounting(4)
    loader = sk.DataLoader(sk.range(0, 4), batch_size=4, sampler=sampler)
    assert [b.tolist() for _ in range(3) for b in loader] == [
        [0, 1, 2, 3],
        [3, 0, 1, 2],
        [2, 3, 0, 1],
    ]
    assert sampler.epochs == 3


def test_a_sampler_state_that_is_not_json_is_refused() -> None:
    class Opaque(EpochCounting):
        def state_dict(self) -> dict[str, Any]:
            return {"rng": object()}

    loader = sk.DataLoader(sk.range(0, 4), batch_size=2, sampler=Opaque(4))
    with pytest.raises(TypeError, match="JSON"):
        list(loader)
