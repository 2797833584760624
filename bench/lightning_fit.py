"""A Lightning ``fit`` epoch over the JPEG image folder, stoker's drop-in against PyTorch's loader.

    $ python bench/lightning_fit.py --out lightning_fit.json      # 1,000 images, 3 runs each
    $ python bench/lightning_fit.py --images 4000 --runs 5

Both rows train the same tiny ``LightningModule`` (a global average pool and a linear
layer over the 3 channels, so that loading dominates) for one epoch with
``Trainer(accelerator="cpu", max_epochs=1)``, no logger, checkpoints or progress bar.
The dataset is the ``image_folder`` workload's PyTorch dataset, the same object for
both rows: record ``i`` is file ``i`` read and decoded by Pillow, cropped at random
(RandomResizedCrop 224, scale 0.08-1) and resized by Pillow's bilinear filter, flipped
at random and normalised to float32 CHW with NumPy; its label is ``i % 10``. The
images are the generated 256x256 JPEGs of ``stoker._bench.workloads.image_folder``,
written once into ``--cache`` and reused.

Rows: ``torch``, ``torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True,
num_workers=2)``, and ``stoker``, ``stoker.torch.DataLoader`` with the same arguments
(stoker's engine: process workers, batches collated into recycled shared-memory
buffers). The two rows alternate, ``--runs`` times each; a row's time is the wall time
of ``trainer.fit(...)``, starting the workers included; images/s is the images of
the epoch over that time. The table shows each row's median, the ratio of the
medians (stoker / torch) and the median of the per-run ratios (each stoker run over
the torch run just before it, which a slowly changing load on a shared machine
disturbs less). Every epoch is checked to have trained on every image once.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

FORMAT = "stoker-bench-lightning-fit/1"
BATCH_SIZE = 64
WORKERS = 2


class Labelled:
    """The image-folder workload's dataset, with a label and the record's index."""

    def __init__(self, paths: list[str]) -> None:
        from stoker._bench.workloads.image_folder import PeerImages

        self._images = PeerImages(paths)

    def __len__(self) -> int:
        return len(self._images)

    def __getitem__(self, index: int) -> tuple[Any, int, int]:
        return self._images[index], index % 10, index


def _module() -> Any:
    import lightning as L
    import torch

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.head = torch.nn.Linear(3, 10)
            self.seen: list[int] = []

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            images, labels, ids = batch
            self.seen.extend(ids.tolist())
            logits = self.head(images.mean(dim=(2, 3)))
            return torch.nn.functional.cross_entropy(logits, labels)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Classifier()


def fit_once(loader_cls: Any, dataset: Labelled) -> float:
    """Seconds of one ``fit`` epoch; checks that it trained on every image once."""
    import lightning as L

    module = _module()
    loader = loader_cls(dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=WORKERS)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    start = time.perf_counter()
    trainer.fit(module, train_dataloaders=loader)
    seconds = time.perf_counter() - start
    if sorted(module.seen) != list(range(len(dataset))):
        raise RuntimeError(f"{loader_cls.__module__}: the epoch did not read every image once")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=1000, help="images in the epoch")
    parser.add_argument("--runs", type=int, default=3, help="timed fits per row")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "stoker-bench")
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)

    import logging

    import lightning  # before the loggers' levels: importing it sets them
    import torch

    import stoker.torch as skt
    from stoker._bench.workloads.image_folder import image_folder

    warnings.simplefilter("ignore")  # Lightning's advice about workers and loggers
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    root = image_folder(args.cache, args.images, lambda line: print(line, file=sys.stderr))
    paths = sorted(str(p) for p in root.glob("class_*/*.jpg"))
    paths.sort(key=lambda p: Path(p).name)  # image i is paths[i]
    dataset = Labelled(paths)
    rows = {"torch": torch.utils.data.DataLoader, "stoker": skt.DataLoader}
    seconds: dict[str, list[float]] = {name: [] for name in rows}
    fit_once(rows["torch"], Labelled(paths[: 2 * BATCH_SIZE]))  # warm up imports and files
    for run in range(args.runs):
        for name, cls in rows.items():
            seconds[name].append(fit_once(cls, dataset))
            rate = len(dataset) / seconds[name][-1]
            print(f"run {run + 1} {name:>6}: {seconds[name][-1]:6.2f} s  {rate:7.1f} images/s")
    medians = {name: len(dataset) / statistics.median(s) for name, s in seconds.items()}
    ratio = medians["stoker"] / medians["torch"]
    # Each stoker run beside the torch run just before it: robust to a load that drifts.
    pairs = zip(seconds["torch"], seconds["stoker"], strict=True)
    paired = statistics.median([t / s for t, s in pairs])
    print()
    print(f"Lightning fit, 1 epoch of {len(dataset)} JPEGs, batch {BATCH_SIZE}, {WORKERS} workers")
    print(f"{'row':<8}{'median images/s':>18}{'runs (s)':>28}")
    for name, s in seconds.items():
        print(f"{name:<8}{medians[name]:>18.1f}{'  '.join(f'{x:.2f}' for x in s):>28}")
    print(f"ratio stoker / torch (medians): {ratio:.3f}; median of paired runs: {paired:.3f}")
    if args.out is not None:
        result = {
            "format": FORMAT,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {
                "platform": platform.platform(),
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "load_average": os.getloadavg(),
            },
            "versions": {"torch": torch.__version__, "lightning": lightning.__version__},
            "images": len(dataset),
            "batch_size": BATCH_SIZE,
            "workers": WORKERS,
            "seconds": seconds,
            "median_images_per_s": medians,
            "ratio_stoker_over_torch": ratio,
            "paired_ratio_median": paired,
        }
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
