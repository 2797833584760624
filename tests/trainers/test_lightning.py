"""Lightning's ``Trainer`` with ``stoker.torch.DataLoader``, each scenario run beside
``torch.utils.data.DataLoader`` (or torchdata's ``StatefulDataLoader`` where torch
cannot resume) in the same test: the records each step sees, step counts, metrics,
weights and what a checkpoint resumes to are equal, and stoker's engine does the
reading (its worker processes, its class behind Lightning's re-created loaders).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning")
pytest.importorskip("torchdata")

import lightning as L
import torch
from lightning.pytorch.callbacks import BasePredictionWriter, ModelCheckpoint
from lightning_helpers import (
    LOADERS,
    Draws,
    Recorder,
    Records,
    child_processes,
    run_script,
    trainer,
)
from torch.utils.data import RandomSampler
from torchdata.stateful_dataloader import StatefulDataLoader

import stoker.torch as skt

pytestmark = [
    pytest.mark.filterwarnings("ignore::lightning.fabric.utilities.warnings.PossibleUserWarning"),
    pytest.mark.filterwarnings("ignore:You requested to overfit:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:.set_vital. is deprecated:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*checkpoint that ended before the epoch ended.*"),
    pytest.mark.filterwarnings("ignore:.*Checkpoint directory.*exists and is not empty.*"),
    pytest.mark.filterwarnings("ignore:Be aware that when using .ckpt_path.:UserWarning"),
]


def _torch_order(seed: int = 0) -> RandomSampler:
    """A sampler of torch's own (shuffled by its generator), given to both loaders."""
    return RandomSampler(range(40), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("workers", [0, 2])
def test_fit_validate_predict_equal_torch(workers):
    results: dict[str, Any] = {}
    for name, cls in LOADERS.items():

        def make(stage: str, cls: Any = cls) -> Any:
            return cls(Records(), batch_size=4, num_workers=workers)

        L.seed_everything(0, verbose=False)
        module = Recorder(make)
        t = trainer(max_epochs=2)
        t.fit(module)
        fit_metrics = {k: v.item() for k, v in t.callback_metrics.items()}
        validated = t.validate(module, verbose=False)
        predicted = torch.cat(t.predict(module))
        results[name] = (module, fit_metrics, validated, predicted)

    (ref, ref_fit, ref_val, ref_pred), (got, fit, val, pred) = results["torch"], results["stoker"]
    assert len(got.train_seen) == 20
    assert got.train_seen == ref.train_seen
    assert got.val_seen == ref.val_seen
    assert fit == ref_fit
    assert val == ref_val
    assert torch.equal(pred, ref_pred)
    assert got.weights() == ref.weights()
    assert got.loader_types == {skt.DataLoader}
    if workers:  # the records were read in stoker's worker processes
        assert os.getpid() not in got.readers
        assert got.children_in_fit >= workers


def test_limit_train_batches_equal_torch():
    seen = {}
    for name, cls in LOADERS.items():

        def make(stage: str, cls: Any = cls) -> Any:
            return cls(Records(), batch_size=4, sampler=_torch_order())

        module = Recorder(make)
        trainer(max_epochs=3, limit_train_batches=3, limit_val_batches=2).fit(module)
        seen[name] = (module.train_seen, module.val_seen, module.weights())
    assert len(seen["stoker"][0]) == 9
    assert seen["stoker"] == seen["torch"]


def test_limit_train_batches_with_stokers_shuffle():
    """stoker's own shuffle: each epoch a new order, the epoch's first batches, the same
    with 0 and 2 workers (its determinism), and as many steps as torch's."""
    runs = {}
    for name, workers in (("torch", 0), ("stoker", 0), ("stoker-workers", 2)):
        cls = LOADERS[name.split("-")[0]]

        def make(stage: str, cls: Any = cls, workers: int = workers) -> Any:
            return cls(Records(), batch_size=4, shuffle=True, num_workers=workers)

        module = Recorder(make)
        trainer(max_epochs=3, limit_train_batches=3, limit_val_batches=0).fit(module)
        runs[name] = module.train_seen
    assert runs["stoker"] == runs["stoker-workers"]
    assert [s[:2] for s in runs["stoker"]] == [s[:2] for s in runs["torch"]]
    torch.manual_seed(0)  # the seed the runs' loaders took (Recorder sets it)
    loader = skt.DataLoader(Records(), batch_size=4, shuffle=True)
    for epoch in range(3):
        loader.set_epoch(epoch)
        first = [batch[1].tolist() for batch, _ in zip(loader, range(3), strict=False)]
        assert [ids for e, _, ids in runs["stoker"] if e == epoch] == first
    assert len({str(ids) for _, _, ids in runs["stoker"]}) == 9


def test_overfit_batches_equal_torch():
    seen = {}
    for name, cls in LOADERS.items():

        def make(stage: str, cls: Any = cls) -> Any:
            return cls(Records(), batch_size=4, shuffle=True, num_workers=2)

        module = Recorder(make)
        trainer(max_epochs=3, overfit_batches=2).fit(module)
        seen[name] = module
    got, ref = seen["stoker"], seen["torch"]
    # Lightning re-creates the loader with a SequentialSampler: the first two batches.
    assert [ids for _, _, ids in got.train_seen] == [[0, 1, 2, 3], [4, 5, 6, 7]] * 3
    assert got.train_seen == ref.train_seen
    assert got.weights() == ref.weights()
    assert got.loader_types == {skt.DataLoader}
    assert os.getpid() not in got.readers


class _Writer(BasePredictionWriter):
    def __init__(self) -> None:
        super().__init__("batch")
        self.written: list[tuple[list[int], list[int]]] = []

    def write_on_batch_end(self, trainer, pl_module, prediction, indices, batch, *_: Any) -> None:
        self.written.append((list(indices), batch[1].tolist()))


@pytest.mark.parametrize("workers", [0, 2])
def test_prediction_writer_batch_indices_equal_torch(workers):
    written = {}
    for name, cls in LOADERS.items():

        def make(stage: str, cls: Any = cls) -> Any:
            return cls(Records(), batch_size=6, sampler=_torch_order(3), num_workers=workers)

        writer = _Writer()
        trainer(callbacks=[writer]).predict(Recorder(make), return_predictions=False)
        written[name] = writer.written
    assert len(written["stoker"]) == 7
    assert all(indices == ids for indices, ids in written["stoker"])  # the records' own
    assert written["stoker"] == written["torch"]
    # stoker's own shuffle: the indices Lightning reports are those of the records read
    writer = _Writer()

    def shuffled(stage: str) -> Any:
        return skt.DataLoader(Records(), batch_size=6, shuffle=True, num_workers=workers)

    trainer(callbacks=[writer]).predict(Recorder(shuffled), return_predictions=False)
    assert all(indices == ids for indices, ids in writer.written)
    assert sorted(i for indices, _ in writer.written for i in indices) == list(range(40))
    assert writer.written[0][0] != list(range(6))


def test_ddp_two_ranks_on_cpu_equal_torch(tmp_path):
    out = tmp_path / "rank"
    run_script("lightning_ddp.py", str(out), timeout=180)
    ranks = [json.loads(Path(f"{out}.{rank}").read_text()) for rank in (0, 1)]
    for loader in ("torch", "stoker"):
        for epoch in range(2):
            epoch_ids = [
                i for rank in ranks for e, _, ids in rank[loader]["seen"] if e == epoch for i in ids
            ]
            assert sorted(epoch_ids) == list(range(64))  # every record once per epoch
    for rank in ranks:
        assert len(rank["stoker"]["seen"]) == 16
        assert rank["stoker"]["seen"] == rank["torch"]["seen"]
        assert rank["stoker"]["weights"] == rank["torch"]["weights"]
        assert rank["stoker"]["types"] == ["stoker.torch._loader.DataLoader"]
        assert rank["stoker"]["workers_read"]
        predicted = rank["stoker"]["predicted"]
        assert predicted == rank["torch"]["predicted"]
        assert all(indices == ids for indices, ids in predicted)
    assert sorted(i for r in ranks for ids, _ in r["stoker"]["predicted"] for i in ids) == list(
        range(64)
    )


def _resume_runs(
    cls: Any, ckpt_dir: Path, workers: int, resume_workers: tuple[int, ...]
) -> tuple[Recorder, list[Recorder]]:
    """An uninterrupted run saving every 3 steps, and runs resumed from step 6 (epoch 0
    of 10 steps, mid-epoch) to the end, one per number of workers in ``resume_workers``."""

    def fit(workers: int, ckpt_path: Path | None = None) -> Recorder:
        def make(stage: str) -> Any:
            return cls(Records(), batch_size=4, shuffle=True, num_workers=workers)

        L.seed_everything(0, verbose=False)
        module = Recorder(make)
        every = ModelCheckpoint(dirpath=ckpt_dir, every_n_train_steps=3, save_top_k=-1)
        saving = ckpt_path is None
        t = trainer(
            max_epochs=2,
            limit_val_batches=0,
            enable_checkpointing=saving,
            callbacks=[every] if saving else [],
        )
        t.fit(module, ckpt_path=ckpt_path)
        return module

    full = fit(workers)
    return full, [fit(w, ckpt_dir / "epoch=0-step=6.ckpt") for w in resume_workers]


def test_mid_epoch_resume_equal_uninterrupted_run(tmp_path):
    runs = {
        "torchdata": _resume_runs(StatefulDataLoader, tmp_path / "torchdata", 2, (2,)),
        # stoker's state resumes with another number of workers too
        "stoker": _resume_runs(skt.DataLoader, tmp_path / "stoker", 2, (2, 0)),
    }
    for full, resumed_runs in runs.values():
        assert len(full.train_seen) == 20
        for resumed in resumed_runs:
            assert resumed.train_seen == full.train_seen[6:]  # per step, from step 7 on
            assert resumed.weights() == full.weights()
    stoker_resumed = runs["stoker"][1][0]
    assert stoker_resumed.train_seen[0][:2] == (0, 6)
    assert stoker_resumed.loader_types == {skt.DataLoader}
    assert os.getpid() not in stoker_resumed.readers
    # the same steps and epochs as torchdata's loader (its shuffled order is its own)
    assert [s[:2] for s in stoker_resumed.train_seen] == [
        s[:2] for s in runs["torchdata"][1][0].train_seen
    ]


class _DrawRecorder(L.LightningModule):
    def __init__(self, cls: Any) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.cls = cls
        self.draws: dict[tuple[int, int], float] = {}  # (worker, its read count) -> draw

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, workers, reads, draws = batch
        for w, r, d in zip(workers.tolist(), reads.tolist(), draws.tolist(), strict=True):
            self.draws[w, r] = d
        return self.layer(x).mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> Any:
        return self.cls(Draws(), batch_size=4, num_workers=2)


def test_seed_everything_workers_seeds_stokers_workers(monkeypatch):
    """``seed_everything(workers=True)`` gives the loader Lightning's worker_init_fn (it
    sets the attribute on the built loader): stoker's workers run it, so the k-th draw
    of worker w is torch's."""
    draws = {}
    for name, cls in LOADERS.items():
        monkeypatch.setenv("PL_SEED_WORKERS", "0")  # seed_everything sets it; undone after
        monkeypatch.setenv("PL_GLOBAL_SEED", "0")
        L.seed_everything(7, workers=True, verbose=False)
        module = _DrawRecorder(cls)
        trainer(max_epochs=1, limit_val_batches=0).fit(module)
        draws[name] = module.draws
    common = draws["torch"].keys() & draws["stoker"].keys()
    assert len(common) >= 8
    assert {k: draws["stoker"][k] for k in common} == {k: draws["torch"][k] for k in common}


def test_persistent_workers_end_when_fit_returns():
    """Three fits with persistent workers for training and validation: workers live
    during each fit and none is left after it, as with torch's loader."""
    for name, cls in LOADERS.items():
        before = child_processes()
        for _ in range(3):

            def make(stage: str, cls: Any = cls) -> Any:
                return cls(Records(), batch_size=4, num_workers=2, persistent_workers=True)

            module = Recorder(make)
            trainer(max_epochs=2, limit_val_batches=2).fit(module)
            assert module.children_in_fit >= 2, name
            assert len(module.val_seen) == 4, name
            assert not child_processes() - before, name
