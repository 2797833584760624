"""Datasets, a tiny model and training loops for the Accelerate tests.

Every scenario runs twice, once with ``torch.utils.data.DataLoader`` prepared by
``accelerator.prepare`` and once with ``stoker.torch.DataLoader`` prepared by
``stoker.torch.prepare_for_accelerate``; the loops here return what each step saw
(record ids, the process that read them, whether a stoker worker built them), how
often the optimizer stepped and the final weights, so the two runs can be compared.
Used in the test process and by ``accelerate_scripts/two_processes.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import DataLoaderConfiguration, set_seed
from torch.utils.data import Dataset

import stoker as sk
import stoker.torch as st


class Records(Dataset):  # type: ignore[type-arg]
    """Record ``i``: features, a target and its id; notes every id read in this process
    (``reads``) and whether a stoker worker built the record."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.reads: list[int] = []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        self.reads.append(int(i))
        return {
            "x": torch.tensor([i / self.n, (i % 3) / 3.0]),
            "y": torch.tensor([(i % 5) / 5.0]),
            "id": torch.tensor(i),
            "stoker_worker": torch.tensor(sk.get_worker_info() is not None),
        }


def fresh_accelerator(**kwargs: Any) -> Accelerator:
    """A new ``Accelerator`` on CPU, with Accelerate's process-wide state cleared first
    (one test process builds several)."""
    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    config = DataLoaderConfiguration(
        use_stateful_dataloader=kwargs.pop("stateful", False),
        use_seedable_sampler=kwargs.pop("seedable", False),
    )
    return Accelerator(cpu=True, dataloader_config=config, **kwargs)


def make_loader(kind: str, accelerator: Accelerator, dataset: Dataset, **kwargs: Any) -> Any:
    """``kind`` "torch": PyTorch's loader prepared by Accelerate; "stoker": the drop-in
    prepared the documented way."""
    set_seed(0)
    if kind == "torch":
        return accelerator.prepare(torch.utils.data.DataLoader(dataset, **kwargs))
    return st.prepare_for_accelerate(accelerator, st.DataLoader(dataset, **kwargs))


def model_and_optimizer(accelerator: Accelerator) -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return accelerator.prepare(model, optimizer)


def weights(model: Any) -> list[float]:
    return [round(float(v), 6) for p in model.parameters() for v in p.detach().flatten()]


def train(
    accelerator: Accelerator,
    loader: Any,
    model: Any,
    optimizer: Any,
    epochs: range,
    *,
    first_pass: Any = None,
) -> dict[str, Any]:
    """Train for ``epochs`` under ``accelerator.accumulate``; ``first_pass`` (a skipped
    loader) replaces the loader in the first epoch."""
    steps: list[list[int]] = []
    optimizer_steps = 0
    in_workers: list[bool] = []
    for epoch in epochs:
        source = first_pass if first_pass is not None and epoch == epochs[0] else loader
        for batch in source:
            with accelerator.accumulate(model):
                loss = torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
                optimizer_steps += int(accelerator.sync_gradients)
            steps.append(batch["id"].tolist())
            in_workers.extend(batch["stoker_worker"].tolist())
    return {
        "steps": steps,
        "optimizer_steps": optimizer_steps,
        "weights": weights(model),
        "in_stoker_workers": in_workers,
    }


def evaluate(accelerator: Accelerator, loader: Any) -> list[int]:
    """Every record id ``gather_for_metrics`` hands back, in order."""
    gathered: list[int] = []
    for batch in loader:
        gathered.extend(accelerator.gather_for_metrics(batch["id"]).tolist())
    return gathered
