"""A tiny BERT and an HF ``Trainer`` whose loaders are PyTorch's or stoker's drop-in."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.utils.data as tud
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainingArguments,
)
from transformers.utils import logging as hf_logging

import stoker.torch

hf_logging.set_verbosity_error()

LOADERS: dict[str, Any] = {"torch": tud.DataLoader, "stoker": stoker.torch.DataLoader}


class Records(tud.Dataset[dict[str, torch.Tensor]]):
    """``n`` short token sequences; each carries its index as ``idx``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        return {
            "input_ids": torch.randint(0, 50, (6,), generator=g),
            "labels": torch.tensor(i % 2),
            "idx": torch.tensor(i),
        }


def tiny_bert() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=8,
    )
    return BertForSequenceClassification(config)


@dataclass
class Seen:
    """What the model was given: the record indices of each training step and of
    each evaluation batch."""

    train: list[list[int]] = field(default_factory=list)
    eval: list[list[int]] = field(default_factory=list)


def make_trainer(
    kind: str,
    out: Path,
    *,
    train: tud.Dataset[Any] | None = None,
    evaluate: tud.Dataset[Any] | None = None,
    loader_kwargs: Callable[[], dict[str, Any]] = dict,
    prepare_eval: bool = False,
    **args: Any,
) -> tuple[Trainer, Seen]:
    """A ``Trainer`` whose ``get_*_dataloader`` return ``LOADERS[kind]``.

    ``loader_kwargs()`` gives the train loader's extra arguments (a sampler, shuffle).
    ``prepare_eval`` hands the torch eval loader to ``accelerator.prepare`` as the
    Trainer's own ``get_eval_dataloader`` does.
    """
    seen = Seen()
    loader_class = LOADERS[kind]

    class Recording(Trainer):
        def get_train_dataloader(self) -> Any:
            return loader_class(
                self.train_dataset,
                batch_size=self.args.per_device_train_batch_size,
                collate_fn=tud.default_collate,
                num_workers=self.args.dataloader_num_workers,
                **loader_kwargs(),
            )

        def _eval_loader(self, dataset: Any) -> Any:
            loader = loader_class(
                dataset,
                batch_size=self.args.per_device_eval_batch_size,
                collate_fn=tud.default_collate,
                num_workers=self.args.dataloader_num_workers,
            )
            return self.accelerator.prepare(loader) if prepare_eval else loader

        def get_eval_dataloader(self, eval_dataset: Any = None) -> Any:
            return self._eval_loader(self.eval_dataset if eval_dataset is None else eval_dataset)

        def get_test_dataloader(self, test_dataset: Any) -> Any:
            return self._eval_loader(test_dataset)

        def training_step(self, model: Any, inputs: Any, *a: Any, **kw: Any) -> Any:
            seen.train.append(inputs.pop("idx").tolist())
            return super().training_step(model, inputs, *a, **kw)

        def prediction_step(self, model: Any, inputs: Any, *a: Any, **kw: Any) -> Any:
            seen.eval.append(inputs.pop("idx").tolist())
            return super().prediction_step(model, inputs, *a, **kw)

    settings: dict[str, Any] = {
        "output_dir": str(out),
        "use_cpu": True,
        "report_to": [],
        "per_device_train_batch_size": 4,
        "per_device_eval_batch_size": 7,
        "num_train_epochs": 2,
        "save_strategy": "no",
        "logging_steps": 1,
        "remove_unused_columns": False,
        "disable_tqdm": True,
        **args,
    }
    trainer = Recording(
        model=tiny_bert(),
        args=TrainingArguments(**settings),
        train_dataset=train,
        eval_dataset=evaluate,
    )
    return trainer, seen


def losses(trainer: Trainer) -> list[float]:
    """The training loss logged at every step."""
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
