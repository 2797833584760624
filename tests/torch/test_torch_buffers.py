"""Tensors made from stoker's recycled buffers are never overwritten while held.

``torch.from_numpy`` keeps the array it views alive, and stoker reuses a buffer (a
pool slot in this process, a shared-memory slot with process workers) only when no
reference to it is left. Held tensors therefore keep their values however many
batches follow; dropped ones give their buffers back, which the repeated addresses
show.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch_helpers import Tuples

import stoker as sk
import stoker.torch as skt
from stoker.torch import to_torch

MODES = [("inline", 0), ("thread", 2), ("process", 2)]


def _source(n: int) -> tuple[sk.Dataset[Any], np.ndarray]:
    image = np.random.default_rng(0).integers(0, 255, size=(n, 8, 8), dtype=np.uint8)
    return sk.from_arrays(image=image, label=np.arange(n)), image


def _loader(n: int, mode: str, workers: int, **kwargs: Any) -> sk.DataLoader[Any]:
    dataset, _ = _source(n)
    return sk.DataLoader(
        dataset, batch_size=4, num_workers=workers, worker_mode=mode, shuffle=True, **kwargs
    )


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize(("mode", "workers"), MODES)
def test_held_tensors_stay_intact_for_a_whole_epoch(mode: str, workers: int) -> None:
    _, image = _source(200)
    with _loader(200, mode, workers) as loader:
        for _ in range(2):  # the second epoch reuses whatever the first gave back
            held = list(to_torch(loader, prefetch=3))
            assert len(held) == 50
            labels = torch.cat([b["label"] for b in held])
            assert sorted(labels.tolist()) == list(range(200))
            for batch in held:
                expected = torch.from_numpy(image[batch["label"].numpy()])
                assert torch.equal(batch["image"], expected)
            pointers = {b["image"].data_ptr() for b in held}
            assert len(pointers) == len(held)  # no two held batches share memory


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize(("mode", "workers"), MODES)
def test_dropped_tensors_let_buffers_be_reused(mode: str, workers: int) -> None:
    with _loader(200, mode, workers) as loader:
        pointers = [batch["image"].data_ptr() for batch in to_torch(loader, prefetch=1)]
    assert len(pointers) == 50
    assert len(set(pointers)) < 25  # the same few buffers, over and over


@pytest.mark.usefixtures("no_leaks")
def test_the_drop_in_loaders_held_batches_stay_intact() -> None:
    with skt.DataLoader(Tuples(64), batch_size=4, num_workers=2, shuffle=True) as loader:
        held = list(loader)
        reused = [x.data_ptr() for x, _ in loader]
    for x, y in held:
        assert torch.equal(x, torch.arange(3, dtype=torch.float64) + y[:, None])
    assert len({x.data_ptr() for x, _ in held}) == len(held)
    assert len(set(reused)) < len(reused)
