"""The two-process Accelerate scenarios, run by ``torch.distributed.run`` (gloo, CPU).

Usage (with tests/trainers and src on PYTHONPATH):
    python -m torch.distributed.run --nproc_per_node 2 ... two_processes.py OUT_DIR

Each process writes ``OUT_DIR/rank<i>.json``: per scenario, what the PyTorch loader
prepared by Accelerate and the drop-in prepared by ``stoker.torch.prepare_for_accelerate``
each gave this process.
"""

from __future__ import annotations

import faulthandler
import json
import os
import pathlib
import sys

import torch
from accelerate_helpers import (
    Records,
    evaluate,
    fresh_accelerator,
    make_loader,
    model_and_optimizer,
    train,
)

import stoker.torch as st
from stoker.errors import ConfigError


def prepare_and_train(kind: str, workers: int = 0) -> dict[str, object]:
    accelerator = fresh_accelerator()
    data = Records(32)
    loader = make_loader(kind, accelerator, data, batch_size=4, num_workers=workers)
    model, optimizer = model_and_optimizer(accelerator)
    out = train(accelerator, loader, model, optimizer, range(2))
    out["reads"] = sorted(data.reads)
    out["stoker_base"] = isinstance(loader.base_dataloader, st.DataLoader)
    return out


def shuffled_epochs() -> dict[str, object]:
    accelerator = fresh_accelerator()
    loader = make_loader("stoker", accelerator, Records(32), batch_size=4, shuffle=True)
    return {"epochs": [[i for b in loader for i in b["id"].tolist()] for _ in range(2)]}


def accumulation(kind: str) -> dict[str, object]:
    accelerator = fresh_accelerator(gradient_accumulation_steps=3)
    loader = make_loader(kind, accelerator, Records(64), batch_size=4)
    model, optimizer = model_and_optimizer(accelerator)
    return train(accelerator, loader, model, optimizer, range(2))


def metrics(kind: str) -> dict[str, object]:
    accelerator = fresh_accelerator()
    loader = make_loader(kind, accelerator, Records(30), batch_size=7)
    return {"gathered": evaluate(accelerator, loader)}


def seeds_differ() -> str:
    """A shuffling loader whose seed differs per process is refused, not split wrongly."""
    accelerator = fresh_accelerator()
    generator = torch.Generator().manual_seed(accelerator.process_index)
    loader = st.DataLoader(Records(8), batch_size=2, shuffle=True, generator=generator)
    try:
        st.prepare_for_accelerate(accelerator, loader)
    except ConfigError as exc:
        return str(exc)
    return "prepared"


def main() -> None:
    out_dir = pathlib.Path(sys.argv[1])
    kinds = ("torch", "stoker")
    result: dict[str, object] = {
        "prepare": {kind: prepare_and_train(kind) for kind in kinds},
        "prepare_workers": {kind: prepare_and_train(kind, workers=2) for kind in kinds},
        "shuffled": shuffled_epochs(),
        "accumulation": {kind: accumulation(kind) for kind in kinds},
        "metrics": {kind: metrics(kind) for kind in kinds},
        "seeds_differ": seeds_differ(),
    }
    rank = torch.distributed.get_rank()
    (out_dir / f"rank{rank}.json").write_text(json.dumps(result))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    # An abort names the Python frames it came from. Once the results are written and
    # the group destroyed, the rank leaves without the interpreter's teardown, where
    # gloo's C++ threads can abort a loaded machine's exit ("terminate called without
    # an active exception") after every scenario has passed.
    faulthandler.enable(all_threads=True)
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
