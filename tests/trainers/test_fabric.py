"""Lightning Fabric's ``setup_dataloaders`` with ``stoker.torch.DataLoader``, in one
process and in two (Fabric's own launcher), each run beside
``torch.utils.data.DataLoader`` in the same test: the records of each step and process,
the weights, ``use_distributed_sampler`` honoured, and stoker's engine doing the reading.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning")

import torch
from lightning.fabric import Fabric
from lightning_helpers import LOADERS, Records, run_script
from torch.utils.data import RandomSampler

import stoker.torch as skt


def _train(cls: Any, workers: int, **kwargs: Any) -> dict[str, Any]:
    fabric = Fabric(accelerator="cpu", devices=1)
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model, optimizer = fabric.setup(model, optimizer)
    loader = fabric.setup_dataloaders(cls(Records(), batch_size=4, num_workers=workers, **kwargs))
    seen, readers = [], set()
    for epoch in range(2):
        for x, ids, pids in loader:
            seen.append((epoch, ids.tolist()))
            readers.update(pids.tolist())
            loss = (model(x) - 2 * x).pow(2).mean()
            optimizer.zero_grad()
            fabric.backward(loss)
            optimizer.step()
    return {
        "seen": seen,
        "weights": [p.item() for p in model.parameters()],
        "inner": type(loader._dataloader),
        "workers_read": os.getpid() not in readers,
    }


@pytest.mark.parametrize("workers", [0, 2])
def test_setup_dataloaders_one_process_equal_torch(workers):
    order = {"sampler": RandomSampler(range(40), generator=torch.Generator().manual_seed(0))}
    ref = _train(LOADERS["torch"], workers, **order)
    order = {"sampler": RandomSampler(range(40), generator=torch.Generator().manual_seed(0))}
    got = _train(LOADERS["stoker"], workers, **order)
    assert len(got["seen"]) == 20
    assert got["seen"] == ref["seen"]
    assert got["weights"] == ref["weights"]
    assert got["inner"] is skt.DataLoader
    assert got["workers_read"] == bool(workers)


def test_setup_dataloaders_keeps_stokers_shuffle():
    """stoker's own shuffle under Fabric: a new order per epoch (Fabric places the epoch
    on the sampler), the same with 0 and 2 workers, every record once per epoch."""
    runs = [_train(skt.DataLoader, workers, shuffle=True)["seen"] for workers in (0, 2)]
    assert runs[0] == runs[1]
    epochs = [[i for e, ids in runs[0] if e == epoch for i in ids] for epoch in (0, 1)]
    assert [sorted(ids) for ids in epochs] == [list(range(40))] * 2
    assert epochs[0] != epochs[1]


def test_setup_dataloaders_two_processes_equal_torch(tmp_path):
    out = tmp_path / "rank"
    run_script("fabric_ddp.py", str(out), timeout=180)
    ranks = [json.loads(Path(f"{out}.{rank}").read_text()) for rank in (0, 1)]
    for loader in ("torch", "stoker"):
        for epoch in range(2):
            ids = [
                i
                for rank in ranks
                for e, batch in rank[f"{loader}-distributed"]["seen"]
                if e == epoch
                for i in batch
            ]
            assert sorted(ids) == list(range(64))  # each record once across the processes
    for rank in ranks:
        for setting in ("distributed", "whole"):
            got, ref = rank[f"stoker-{setting}"], rank[f"torch-{setting}"]
            assert got["type"] == "stoker.torch._loader.DataLoader"
            assert got["workers_read"]
            assert len(got["seen"]) == (8 if setting == "distributed" else 16) * 2
            if setting == "distributed":  # the order is the DistributedSampler's
                assert got["seen"] == ref["seen"]
                assert got["weights"] == ref["weights"]
        # use_distributed_sampler=False: each process reads every record, in the
        # loader's own order (stoker's shuffle: the same in both processes)
        whole = rank["stoker-whole"]["seen"]
        assert sorted(i for e, ids in whole if e == 0 for i in ids) == list(range(64))
    assert ranks[0]["stoker-whole"]["seen"] == ranks[1]["stoker-whole"]["seen"]
