"""Fabric's launcher, ``Fabric(accelerator="cpu", devices=2, strategy="ddp")``: torch's and
stoker's loaders set up with and without ``use_distributed_sampler``, trained for two
epochs in the same two processes (the launcher re-runs this script for rank 1).

Usage: ``python fabric_ddp.py OUT``; rank ``r`` writes ``OUT.r`` (JSON): per loader and
setting, the record ids of each step, the final weights, the class behind Fabric's
wrapper and whether worker processes read every record.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import torch
from lightning.fabric import Fabric
from lightning_helpers import LOADERS, Records


def train(fabric: Fabric, cls: Any, distributed: bool) -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model, optimizer = fabric.setup(model, optimizer)
    loader = cls(Records(64), batch_size=4, shuffle=True, num_workers=2)
    loader = fabric.setup_dataloaders(loader, use_distributed_sampler=distributed)
    seen, readers = [], set()
    for epoch in range(2):
        for x, ids, pids in loader:
            seen.append((epoch, ids.tolist()))
            readers.update(pids.tolist())
            loss = (model(x) - 2 * x).pow(2).mean()
            optimizer.zero_grad()
            fabric.backward(loss)
            optimizer.step()
    inner = type(loader._dataloader)
    return {
        "seen": seen,
        "weights": [p.item() for p in model.parameters()],
        "type": f"{inner.__module__}.{inner.__qualname__}",
        "workers_read": os.getpid() not in readers,
    }


def main(out: str) -> None:
    warnings.simplefilter("ignore")  # Lightning's advice on workers and loggers
    fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
    fabric.launch()
    report = {
        f"{name}-{'distributed' if distributed else 'whole'}": train(fabric, cls, distributed)
        for name, cls in LOADERS.items()
        for distributed in (True, False)
    }
    with open(f"{out}.{fabric.global_rank}", "w", encoding="utf-8") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
