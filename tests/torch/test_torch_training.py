"""A training loop written for ``torch.utils.data.DataLoader`` runs unchanged on the drop-in.

Same order (no shuffle, or an explicit seeded sampler) gives the same losses and the
same weights, bit for bit, with and without workers: the batches are the same, and
the global RNG (which dropout draws from) is used as PyTorch's loader uses it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, SubsetRandomSampler, TensorDataset

import stoker.torch as skt


def train(make_loader: Callable[..., Any], **kwargs: Any) -> tuple[list[float], dict[str, Any]]:
    torch.manual_seed(0)
    x = torch.randn(96, 6)
    y = (x @ torch.randn(6, 1) + 0.1 * torch.randn(96, 1)).squeeze(1)
    loader = make_loader(TensorDataset(x, y), batch_size=8, **kwargs)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    device = torch.device("cpu")
    model.to(device)
    losses = []
    for _epoch in range(3):
        model.train()
        steps = 0
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = F.mse_loss(model(inputs).squeeze(1), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            steps += 1
        assert steps == len(loader)
    return losses, model.state_dict()


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("order", ["sequential", "sampler"])
def test_same_losses_and_weights(workers: int, order: str) -> None:
    def arguments() -> dict[str, Any]:
        if order == "sequential":
            return {"num_workers": workers}
        generator = torch.Generator().manual_seed(1)
        return {"num_workers": workers, "sampler": SubsetRandomSampler(range(96), generator)}

    expected_losses, expected_weights = train(DataLoader, **arguments())
    losses, weights = train(skt.DataLoader, **arguments())
    assert losses == expected_losses
    assert len(losses) == 36
    for name, value in expected_weights.items():
        assert torch.equal(weights[name], value), name
