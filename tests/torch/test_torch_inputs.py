"""``stoker.DataLoader`` takes PyTorch's datasets, samplers and batch samplers as its own.

Also: tensors in records collate like arrays, and ``import stoker`` leaves PyTorch
unimported.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from torch_helpers import Range, Tuples, WholeRange

import stoker as sk
from stoker.torch import to_torch


def test_a_map_style_dataset() -> None:
    loader = sk.DataLoader(Tuples(5), batch_size=2)
    x, y = next(iter(loader))
    assert isinstance(x, np.ndarray)  # stoker's own batches are NumPy ...
    assert x.dtype == np.float64
    assert y.tolist() == [0, 1]
    x, y = next(iter(to_torch(loader)))  # ... and tensors through to_torch
    assert x.dtype == torch.float64


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize(("mode", "workers"), [("inline", 0), ("thread", 2), ("process", 2)])
def test_an_iterable_dataset_with_a_length_is_a_stream(mode: str, workers: int) -> None:
    # torch's Dataset defines __getitem__ (raising), so __len__ must not make it map-style
    with sk.DataLoader(
        WholeRange(0, 10), batch_size=3, num_workers=workers, worker_mode=mode
    ) as loader:
        values = sorted(x for b in loader for x in b.tolist())
    assert values == list(range(10))  # stoker splits the stream: nothing is read twice


def test_an_iterable_dataset_without_a_length_resumes() -> None:
    loader = sk.DataLoader(Range(0, 10), batch_size=3)
    it = iter(loader)
    next(it)
    assert [b.tolist() for b in loader.iter(state=it.state_dict())] == [[3, 4, 5], [6, 7, 8], [9]]


def test_torch_samplers_and_batch_samplers() -> None:
    def sampler_() -> tud.SubsetRandomSampler:
        return tud.SubsetRandomSampler([4, 2, 7], generator=torch.Generator().manual_seed(0))

    order, sampler = list(sampler_()), sampler_()
    loader = sk.DataLoader(Tuples(8), batch_size=2, sampler=sampler)
    assert [y.tolist() for _, y in loader] == [order[:2], order[2:]]
    batches = tud.BatchSampler(tud.SequentialSampler(range(8)), 3, drop_last=True)
    loader = sk.DataLoader(Tuples(8), batch_sampler=batches)
    assert [y.tolist() for _, y in loader] == [[0, 1, 2], [3, 4, 5]]


def test_tensor_records_collate_into_arrays() -> None:
    records = [
        {"x": torch.full((2,), i, dtype=torch.int16), "t": torch.tensor(i > 0)} for i in range(3)
    ]
    batch = sk.default_collate(records)
    assert isinstance(batch["x"], np.ndarray)
    assert batch["x"].dtype == np.int16
    assert batch["x"].tolist() == [[0, 0], [1, 1], [2, 2]]
    assert batch["t"].tolist() == [False, True, True]


def test_tensors_numpy_cannot_hold_are_stacked_by_torch() -> None:
    half = [torch.ones(2, dtype=torch.bfloat16) * i for i in range(3)]
    stacked = sk.default_collate(half)
    assert isinstance(stacked, torch.Tensor)
    assert stacked.dtype == torch.bfloat16
    assert stacked.shape == (3, 2)
    graph = [torch.ones(2, requires_grad=True) for _ in range(2)]
    assert sk.default_collate(graph).requires_grad
    with pytest.raises(sk.CollateError, match="cannot collate"):
        sk.default_collate(
            [torch.ones(2, dtype=torch.bfloat16), torch.ones(3, dtype=torch.bfloat16)]
        )


def test_tensors_of_different_shapes_name_the_problem() -> None:
    with pytest.raises(sk.CollateError, match="shape"):
        sk.default_collate([torch.ones(2), torch.ones(3)])


def test_importing_stoker_does_not_import_torch() -> None:
    code = "import sys, stoker; print('torch' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"


def test_every_public_name_is_exported_once() -> None:
    import stoker.torch as skt

    assert sorted(skt.__all__) == [
        "DataLoader",
        "as_tensors",
        "prepare_for_accelerate",
        "skip_first_batches",
        "to_torch",
    ]
    for name in skt.__all__:
        assert getattr(skt, name).__module__.startswith("stoker.torch")


def test_unused_arguments_are_accepted() -> None:
    import stoker.torch as skt

    loader = skt.DataLoader(Tuples(4), batch_size=2, pin_memory_device="cuda", timeout=0)
    assert len(list(loader)) == 2


def test_a_torch_batch_sampler_given_as_sampler_is_refused_when_built() -> None:
    batches = tud.BatchSampler(tud.SequentialSampler(range(8)), 3, drop_last=False)
    with pytest.raises(sk.ConfigError, match="batch_sampler="):
        sk.DataLoader(Tuples(8), batch_size=2, sampler=batches)
