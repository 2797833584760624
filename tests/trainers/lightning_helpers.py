"""A tiny dataset, a recording LightningModule and launch helpers for the Lightning and
Fabric tests.

Each scenario runs once with ``torch.utils.data.DataLoader`` and once with
``stoker.torch.DataLoader``; the records each step saw, the metrics and the weights are
compared. Records carry the id of the process that read them, so a test can tell that
worker processes did the reading.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import psutil
import torch
from torch.utils.data import Dataset

import stoker.torch as skt

SCRIPTS = Path(__file__).parent / "lightning_scripts"
LOADERS: dict[str, Callable[..., Any]] = {
    "torch": torch.utils.data.DataLoader,
    "stoker": skt.DataLoader,
}


class Records(Dataset):  # type: ignore[type-arg]
    """Record ``i``: an input ``[i]``, its index and the id of the process reading it."""

    def __init__(self, n: int = 40) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int]:
        return torch.tensor([float(i) / self.n]), i, os.getpid()


class Draws(Dataset):  # type: ignore[type-arg]
    """Record ``i``: ``[i]``, the worker's id, the count of records this worker read
    before it, and a draw from NumPy's global RNG (as augmentations draw)."""

    def __init__(self, n: int = 40) -> None:
        self.n = n
        self.reads = 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int, float]:
        info = torch.utils.data.get_worker_info()
        self.reads += 1
        wid = -1 if info is None else info.id
        return torch.tensor([float(i)]), wid, self.reads, float(np.random.random())


def child_processes() -> set[int]:
    """The ids of this process's live child processes (worker processes among them)."""
    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}


class Recorder(L.LightningModule):
    """A one-weight regression that records what each step and hook saw.

    ``make_loader(stage)`` builds the loader of a stage ("train", "val", "predict").
    """

    def __init__(self, make_loader: Callable[[str], Any]) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(1, 1)
        self.make_loader = make_loader
        self.train_seen: list[tuple[int, int, list[int]]] = []
        self.val_seen: list[list[int]] = []
        self.readers: set[int] = set()  # processes that read the records
        self.loader_types: set[type] = set()
        self.children_in_fit = 0

    def _loss(self, batch: Any) -> torch.Tensor:
        x, _, _ = batch
        return (self.layer(x) - 2 * x).pow(2).mean()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        _, ids, pids = batch
        self.train_seen.append((self.current_epoch, batch_idx, ids.tolist()))
        self.readers.update(pids.tolist())
        self.children_in_fit = max(self.children_in_fit, len(child_processes()))
        loss = self._loss(batch)
        self.log("train_loss", loss)
        return loss

    def on_train_epoch_start(self) -> None:
        self.loader_types.add(type(self.trainer.train_dataloader))

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        _, ids, pids = batch
        self.val_seen.append(ids.tolist())
        self.readers.update(pids.tolist())
        self.log("val_loss", self._loss(batch))

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, _, pids = batch
        self.readers.update(pids.tolist())
        return self.layer(x)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.5)

    def train_dataloader(self) -> Any:
        return self.make_loader("train")

    def val_dataloader(self) -> Any:
        return self.make_loader("val")

    def predict_dataloader(self) -> Any:
        return self.make_loader("predict")

    def weights(self) -> list[float]:
        return [p.item() for p in self.parameters()]


def trainer(**kwargs: Any) -> L.Trainer:
    """A quiet CPU trainer (no logger, progress bar, summary or checkpoints unless asked)."""
    settings: dict[str, Any] = {
        "accelerator": "cpu",
        "devices": 1,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
    }
    settings.update(kwargs)
    return L.Trainer(**settings)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def run_script(script: str, *args: str, timeout: float = 150) -> str:
    """Run ``lightning_scripts/<script>`` (which launches its own ranks) in a process
    group of its own, on 127.0.0.1 and a free port; kill the whole group if it runs past
    ``timeout``. Returns its output; fails with it if the script fails."""
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path]),
    }
    for name in ("LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "RANK"):
        env.pop(name, None)
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPTS / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{script} ran past {timeout} s:\n{out.decode()[-4000:]}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):  # ranks that outlived the launcher
            os.killpg(proc.pid, signal.SIGKILL)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"{script} failed ({proc.returncode}):\n{text[-4000:]}"
    return text
