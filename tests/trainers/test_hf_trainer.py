"""The HF ``Trainer`` with ``stoker.torch.DataLoader`` from its ``get_*_dataloader``,
against the same Trainer with ``torch.utils.data.DataLoader``: a tiny BERT, on CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from hf_trainer_helpers import Records, losses, make_trainer, weights


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("workers", [0, 2])
def test_training_sees_the_records_and_losses_of_torch(tmp_path: Path, workers: int) -> None:
    # The same sampler order for both loaders: a torch RandomSampler seeded alike.
    def shared_order() -> dict[str, object]:
        data = Records(32)
        return {"sampler": tud.RandomSampler(data, generator=torch.Generator().manual_seed(5))}

    runs = {}
    for kind in ("torch", "stoker"):
        trainer, seen = make_trainer(
            kind,
            tmp_path / kind,
            train=Records(32),
            loader_kwargs=shared_order,
            dataloader_num_workers=workers,
        )
        output = trainer.train()
        runs[kind] = (trainer, seen, output)

    (torch_trainer, torch_seen, torch_out), (trainer, seen, out) = runs["torch"], runs["stoker"]
    assert out.global_step == torch_out.global_step == 16
    assert seen.train == torch_seen.train
    for epoch in (seen.train[:8], seen.train[8:]):
        assert sorted(i for batch in epoch for i in batch) == list(range(32))
    assert losses(trainer) == losses(torch_trainer)
    assert len(losses(trainer)) == 16
    assert out.training_loss == torch_out.training_loss
    same_weights(weights(trainer), weights(torch_trainer))


def test_own_shuffle_is_deterministic_and_visits_every_record_once(tmp_path: Path) -> None:
    orders = []
    for run in range(2):
        trainer, seen = make_trainer(
            "stoker",
            tmp_path / str(run),
            train=Records(32),
            loader_kwargs=lambda: {"shuffle": True},
        )
        trainer.train()
        orders.append(seen.train)
    assert orders[0] == orders[1]
    epochs = [orders[0][:8], orders[0][8:]]
    for epoch in epochs:
        assert sorted(i for batch in epoch for i in batch) == list(range(32))
    assert epochs[0] != epochs[1]  # each epoch its own permutation
    assert epochs[0] != [list(range(i, i + 4)) for i in range(0, 32, 4)]


@pytest.mark.parametrize("workers", [0, 2])
def test_evaluate_and_predict_count_a_short_last_batch_as_torch(
    tmp_path: Path, workers: int
) -> None:
    # 30 records in batches of 7: the last batch holds 2. The Trainer's own eval loader
    # is PyTorch's, handed to accelerator.prepare; that is the reference.
    results = {}
    for kind in ("torch", "stoker"):
        trainer, seen = make_trainer(
            kind,
            tmp_path / kind,
            evaluate=Records(30),
            prepare_eval=kind == "torch",
            dataloader_num_workers=workers,
        )
        metrics = trainer.evaluate()
        predicted = trainer.predict(Records(30))
        results[kind] = (metrics, predicted, seen)

    (torch_metrics, torch_pred, torch_seen), (metrics, pred, seen) = (
        results["torch"],
        results["stoker"],
    )
    assert seen.eval == torch_seen.eval
    assert [len(b) for b in seen.eval] == [7, 7, 7, 7, 2] * 2
    assert metrics["eval_loss"] == pytest.approx(torch_metrics["eval_loss"], rel=1e-6)
    assert pred.metrics["test_loss"] == pytest.approx(torch_pred.metrics["test_loss"], rel=1e-6)
    assert pred.predictions.shape == (30, 2)
    np.testing.assert_array_equal(pred.predictions, torch_pred.predictions)
    np.testing.assert_array_equal(pred.label_ids, torch_pred.label_ids)
    np.testing.assert_array_equal(pred.label_ids, np.arange(30) % 2)

    # The loss over records, each batch weighted by the records it holds.
    trainer, _ = make_trainer("stoker", tmp_path / "check", evaluate=Records(30))
    per_batch = []
    loader = trainer.get_eval_dataloader()
    trainer.model.eval()
    with torch.no_grad():
        for batch in loader:
            batch.pop("idx")
            per_batch.append((trainer.model(**batch).loss.item(), len(batch["labels"])))
    by_records = sum(loss * n for loss, n in per_batch) / 30
    assert metrics["eval_loss"] == pytest.approx(by_records, rel=1e-5)


def test_resume_mid_epoch_equals_the_uninterrupted_run(tmp_path: Path) -> None:
    # 32 records in batches of 4: 8 steps an epoch, 2 epochs; checkpoints every 5
    # steps: checkpoint-5 is in epoch 0, checkpoint-10 in epoch 1.
    def run(kind: str, name: str, shuffle: bool, resume: Path | None = None) -> tuple:
        trainer, seen = make_trainer(
            kind,
            tmp_path / name,
            train=Records(32),
            loader_kwargs=lambda: {"shuffle": shuffle},
            save_strategy="steps",
            save_steps=5,
        )
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        return seen.train, weights(trainer), losses(trainer)

    # The drop-in's own shuffle: the epoch resumed in and the one after are the
    # uninterrupted run's.
    full, full_weights, full_losses = run("stoker", "full", shuffle=True)
    assert full[:8] != full[8:]
    for step in (5, 10):
        rest, rest_weights, rest_losses = run(
            "stoker", f"from{step}", True, tmp_path / "full" / f"checkpoint-{step}"
        )
        assert rest == full[step:], step
        assert rest_losses == full_losses  # the checkpoint's log, then this run's steps
        same_weights(rest_weights, full_weights)

    # Against PyTorch's loader, in the order both share (shuffle=False).
    ref = {}
    for kind in ("torch", "stoker"):
        seen, w, _ = run(kind, f"{kind}-full", shuffle=False)
        rest, rest_w, _ = run(
            kind, f"{kind}-from10", False, tmp_path / f"{kind}-full" / "checkpoint-10"
        )
        assert rest == seen[10:]
        same_weights(rest_w, w)
        ref[kind] = (seen, w)
    assert ref["stoker"][0] == ref["torch"][0]
    same_weights(ref["stoker"][1], ref["torch"][1])


def test_resume_with_two_workers_equals_torch(tmp_path: Path) -> None:
    # A torch RandomSampler seeded alike gives both loaders one order; the resumed
    # epoch is read through skip_first_batches, the epoch after by each loader's workers.
    def shared_order() -> dict[str, object]:
        data = Records(32)
        return {"sampler": tud.RandomSampler(data, generator=torch.Generator().manual_seed(5))}

    runs = {}
    for kind in ("torch", "stoker"):
        for name, resume in (("full", None), ("from5", tmp_path / kind / "full" / "checkpoint-5")):
            trainer, seen = make_trainer(
                kind,
                tmp_path / kind / name,
                train=Records(32),
                loader_kwargs=shared_order,
                dataloader_num_workers=2,
                save_strategy="steps",
                save_steps=5,
            )
            trainer.train(resume_from_checkpoint=str(resume) if resume else None)
            runs[kind, name] = (seen.train, weights(trainer))

    for kind in ("torch", "stoker"):
        assert runs[kind, "from5"][0] == runs[kind, "full"][0][5:]
        same_weights(runs[kind, "from5"][1], runs[kind, "full"][1])
    assert runs["stoker", "full"][0] == runs["torch", "full"][0]
    same_weights(runs["stoker", "from5"][1], runs["torch", "from5"][1])
