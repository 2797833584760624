"""Lightning's ``strategy="ddp", devices=2`` on CPU: fit and predict with torch's loader,
then with stoker's, in the same two ranks (Lightning's launcher re-runs this script for
rank 1).

Usage: ``python lightning_ddp.py OUT``; rank ``r`` writes ``OUT.r`` (JSON): per loader,
the (epoch, step, record ids) it trained on, the final weights, the batch indices a
``BasePredictionWriter`` received with the ids of the records predicted, the loader classes
Lightning handed the module and whether worker processes read every record.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter
from lightning_helpers import LOADERS, Recorder, Records, trainer


class Writer(BasePredictionWriter):
    """Keeps the batch indices Lightning reports and the ids of the records predicted."""

    def __init__(self) -> None:
        super().__init__("batch")
        self.written: list[tuple[list[int], list[int]]] = []

    def write_on_batch_end(self, trainer, pl_module, prediction, indices, batch, *_: Any) -> None:
        self.written.append((list(indices), batch[1].tolist()))


def main(out: str) -> None:
    warnings.simplefilter("ignore")  # Lightning's advice on workers and loggers
    report: dict[str, Any] = {}
    rank = 0
    for name, cls in LOADERS.items():

        def make(stage: str, cls: Any = cls) -> Any:
            return cls(Records(64), batch_size=4, shuffle=stage == "train", num_workers=2)

        L.seed_everything(0, verbose=False)
        module = Recorder(make)
        writer = Writer()
        t = trainer(
            max_epochs=2, limit_val_batches=0, strategy="ddp", devices=2, callbacks=[writer]
        )
        t.fit(module)
        t.predict(module, return_predictions=False)
        rank = t.global_rank
        report[name] = {
            "seen": module.train_seen,
            "weights": module.weights(),
            "types": sorted(f"{c.__module__}.{c.__qualname__}" for c in module.loader_types),
            "workers_read": os.getpid() not in module.readers,
            "predicted": writer.written,
        }
    with open(f"{out}.{rank}", "w", encoding="utf-8") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
