"""``image_folder``: ImageNet-style training input from a folder of class sub-folders.

4,000 generated 256x256 RGB JPEGs (1,000 with ``--quick``) in 10 class folders;
every loader reads them in stoker's epoch-0 shuffled order, with 2 workers (or
threads), batch 64, and applies RandomResizedCrop 224 (scale 0.08-1, ratio 3/4-4/3)
+ random horizontal flip + normalisation to float32 CHW with ImageNet statistics.

Rows:

* ``stoker``: ``sk.vision.train_transform(224).apply(sk.from_image_folder(root))``,
  ``worker_mode="auto"`` (threads), each image decoded straight into the batch buffer,
  crops resampled by torch's uint8 kernel (``backend="auto"`` with torch installed);
* ``stoker pillow``: the same with ``backend="pillow"`` (Pillow resamples, as the
  peers do);
* ``torch``: the PyTorch DataLoader (2 worker processes) over a dataset doing the same
  operations in Pillow + NumPy;
* ``grain threads``: ``grain.MapDataset`` ... ``.to_iter_dataset(ReadOptions(
  num_threads=2))`` with the same Pillow + NumPy function, batched by Grain;
* ``spdl``: an ``spdl.pipeline`` with the same function at concurrency 2 on 2 threads.

All peers decode with Pillow (bit-identical to the decoder stoker picks), cut the box
out and resize it with Pillow's bilinear resampling (torchvision's ``resized_crop``
on a PIL image), and draw the box and the flip from ``record_rng(0, 0, i)`` exactly
as stoker's seeded transform does, so the peers and ``stoker pillow`` yield the same
batches bit for bit. The ``stoker`` row is verified, bit for bit, against the same
operations with the crop resampled by ``torch.nn.functional.interpolate(...,
antialias=True)``; the run records how far that reference is from the Pillow one
(within two levels of 255 in a pixel). Grain and SPDL rows are left out, with a
message, when those packages are not installed.

The decode limit is measured in the same run, before the loaders: one core's rate
of full-size Pillow decodes (``Image.open(...).load()``) of 200 of the images, times
the 2 cores the loaders use. It is the ``limit`` of the stoker row.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import os
import shutil
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk
from stoker._rng import record_rng
from stoker.vision._geometry import random_resized_box

from ..base import BenchContext, Prepared, Runner, Target
from . import workload
from ._common import OrderSampler, index_batches
from .jpeg import _image

IMAGES = 4000
QUICK_IMAGES = 1000
CLASSES = 10
SIZE = 224
BATCH_SIZE = 64
WORKERS = 2
SEED = 0
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)
RECORD_BYTES = 3 * SIZE * SIZE * 4
MEAN = (np.array([0.485, 0.456, 0.406]) * 255).astype(np.float32)[:, None, None]
STD = np.array([0.229, 0.224, 0.225])
INV_STD = (1 / (STD * 255)).astype(np.float32)[:, None, None]


def image_folder(cache_dir: Path, count: int, log: Any) -> Path:
    """``<cache>/image-folder-256/class_k/i.jpg`` for images ``0 .. count - 1`` (image i
    in class ``i % 10``), writing the missing ones first."""
    root = cache_dir / "image-folder-256"
    paths = [root / f"class_{i % CLASSES:02d}" / f"{i:06d}.jpg" for i in range(count)]
    missing = [i for i, path in enumerate(paths) if not path.is_file()]
    if missing:
        log(f"image_folder: writing {len(missing)} JPEG files to {root} (reused by later runs)")
        for i in missing:
            paths[i].parent.mkdir(parents=True, exist_ok=True)
            tmp = paths[i].with_name(f"{paths[i].name}.{os.getpid()}.tmp")
            tmp.write_bytes(_image(i))
            os.replace(tmp, paths[i])
    # A run with fewer images than the folder holds reads a folder of hard links to them
    # (symbolic links would lead out of that folder, which stoker refuses).
    if len(list(root.glob("class_*/*.jpg"))) == count:
        return root
    subset = cache_dir / f"image-folder-256-{count}"
    if not subset.is_dir():
        for path in paths:
            link = subset / path.parent.name / path.name
            link.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, link)
            except OSError:
                shutil.copyfile(path, link)
    return subset


def _normalized(crop: np.ndarray, flip: bool) -> np.ndarray:
    if flip:
        crop = crop[:, ::-1]
    out = np.empty((3, SIZE, SIZE), dtype=np.float32)
    np.subtract(crop.transpose(2, 0, 1), MEAN, out=out, dtype=np.float32)
    np.multiply(out, INV_STD, out=out)
    return out


def peer_transform(path: str, rng: np.random.Generator) -> np.ndarray:
    """The same operations as stoker's, written with Pillow and NumPy (torchvision style)."""
    from PIL import Image

    with Image.open(path) as image:
        rgb = image.convert("RGB")
    box = random_resized_box(rng, rgb.width, rgb.height, SCALE, RATIO)
    flip = rng.random() < 0.5
    crop = np.asarray(rgb.crop(box).resize((SIZE, SIZE), Image.Resampling.BILINEAR))
    return _normalized(crop, flip)


def torch_kernel_transform(path: str, rng: np.random.Generator) -> np.ndarray:
    """:func:`peer_transform` with the crop resampled by torch's antialiased uint8 kernel."""
    import torch
    from PIL import Image

    with Image.open(path) as image:
        pixels = np.asarray(image.convert("RGB"))
    left, top, right, bottom = random_resized_box(
        rng, pixels.shape[1], pixels.shape[0], SCALE, RATIO
    )
    flip = rng.random() < 0.5
    crop = torch.from_numpy(pixels[top:bottom, left:right].copy()).permute(2, 0, 1)[None]
    if crop.shape[2:] != (SIZE, SIZE):
        crop = torch.nn.functional.interpolate(
            crop, size=(SIZE, SIZE), mode="bilinear", antialias=True
        )
    return _normalized(crop[0].permute(1, 2, 0).numpy(), flip)


def decode_limit(paths: list[str], cores: int) -> float:
    """Images/s: one core's full-size Pillow decode rate (best of 3 passes) x ``cores``."""
    from PIL import Image

    sample = [Path(p).read_bytes() for p in paths[:200]]
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for data in sample:
            with Image.open(io.BytesIO(data)) as image:
                image.load()
        best = min(best, time.perf_counter() - start)
    return cores * len(sample) / best


class PeerImages:
    """A map-style dataset for torch: record ``i`` is :func:`peer_transform` of file ``i``."""

    def __init__(self, paths: list[str]) -> None:
        self._paths = paths

    def __len__(self) -> int:
        return len(self._paths)

    def __getitem__(self, index: int) -> np.ndarray:
        return peer_transform(self._paths[index], record_rng(SEED, 0, index))


class Images:
    """Iterates a stoker loader, yielding the image arrays of its batches."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __iter__(self) -> Iterator[np.ndarray]:
        return _ImageIterator(iter(self._loader))


class _ImageIterator:
    def __init__(self, it: Any) -> None:
        self._it = it

    def __iter__(self) -> _ImageIterator:
        return self

    def __next__(self) -> np.ndarray:
        image: np.ndarray = next(self._it)["image"]
        return image

    def stats(self) -> Any:
        return self._it.stats()


def _grain_runner(paths: list[str], order: np.ndarray) -> Runner | None:
    try:
        grain: Any = importlib.import_module("grain")
    except ImportError:
        return None

    def make() -> Any:
        ds = grain.MapDataset.source([int(i) for i in order])
        ds = ds.map(lambda i: peer_transform(paths[i], record_rng(SEED, 0, i)))
        ds = ds.batch(BATCH_SIZE)
        return ds.to_iter_dataset(grain.ReadOptions(num_threads=WORKERS, prefetch_buffer_size=256))

    return Runner("grain threads", "bare", make)


def _spdl_runner(paths: list[str], order: np.ndarray) -> Runner | None:
    try:
        builder: Any = importlib.import_module("spdl.pipeline").PipelineBuilder
    except ImportError:
        return None

    def load(i: int) -> np.ndarray:
        return peer_transform(paths[i], record_rng(SEED, 0, i))

    class Epoch:
        def __iter__(self) -> Iterator[np.ndarray]:
            pipeline = (
                builder()
                .add_source([int(i) for i in order])
                .pipe(load, concurrency=WORKERS, output_order="input")
                .aggregate(BATCH_SIZE, drop_last=False)
                .pipe(np.stack)
                .add_sink(4)
                .build(num_threads=WORKERS)
            )
            with pipeline.auto_stop():
                yield from pipeline

    return Runner("spdl", "bare", Epoch)


@workload(
    "image_folder",
    "4,000 256x256 JPEGs (1,000 with --quick) in class folders: "
    "RandomResizedCrop 224 + flip + normalise, "
    "batch 64, 2 workers; vs torch, Grain, SPDL and the decode limit",
    default=False,
    requires=(("PIL", "images"),),
)
def prepare(ctx: BenchContext) -> Prepared:
    """Write (or reuse) the images; every loader reads them in stoker's epoch-0 order."""
    n = max(1, int((QUICK_IMAGES if ctx.quick else IMAGES) * ctx.scale))
    root = image_folder(ctx.cache_dir, n, ctx.log)
    source = sk.from_image_folder(root)
    paths = source.paths
    order = sk.RandomSampler(n, seed=SEED).cursor(epoch=0).take(n)
    limit = decode_limit(paths, WORKERS)
    ctx.log(f"image_folder: decode limit {limit:,.0f} images/s ({WORKERS} cores x Pillow)")

    def references(transform: Callable[[str, np.random.Generator], np.ndarray]) -> Any:
        for idx in index_batches(order, BATCH_SIZE):
            yield np.stack([transform(paths[i], record_rng(SEED, 0, i)) for i in idx.tolist()])

    kernels_differ = None
    if importlib.util.find_spec("torch") is not None:
        pillow = next(iter(references(peer_transform)))
        torch_kernel = next(iter(references(torch_kernel_transform)))
        levels = np.abs(pillow - torch_kernel) * (255 * STD)[:, None, None]
        kernels_differ = float(levels.max())
        ctx.log(
            f"image_folder: torch's and Pillow's resampling differ by at most "
            f"{kernels_differ:.2f} levels of 255 in the first batch"
        )
    runners: list[Runner] = []
    if ctx.wants("stoker"):
        for label, backend in (("stoker", "auto"), ("stoker pillow", "pillow")):
            transform = sk.vision.train_transform(SIZE, scale=SCALE, ratio=RATIO, backend=backend)
            dataset = transform.apply(source)

            def stoker_loader(dataset: Any = dataset) -> Any:
                return Images(
                    sk.DataLoader(
                        dataset, batch_size=BATCH_SIZE, shuffle=True, seed=SEED, num_workers=WORKERS
                    )
                )

            own = transform.backend == "torch"
            runners.append(
                Runner(
                    label,
                    "stoker",
                    stoker_loader,
                    limit=limit,
                    show_mode=True,
                    reference=partial(references, torch_kernel_transform) if own else None,
                )
            )
    if ctx.wants("torch"):
        torch, records, sampler = ctx.torch, PeerImages(paths), OrderSampler(order)

        def torch_loader() -> Any:
            return torch.utils.data.DataLoader(
                records, batch_size=BATCH_SIZE, sampler=sampler, num_workers=WORKERS
            )

        runners.append(Runner("torch", "torch", torch_loader, limit=limit))
    if ctx.wants("bare"):
        for name, runner in (
            ("grain", _grain_runner(paths, order)),
            ("spdl", _spdl_runner(paths, order)),
        ):
            if runner is None:
                ctx.log(f"image_folder: {name} is not installed: its row is left out")
            else:
                runners.append(runner)

    def reference() -> Any:
        return references(peer_transform)

    return Prepared(
        summary=(
            f"{n:,} 256x256 JPEGs in class folders: RandomResizedCrop 224 + flip + "
            "normalise, batch 64, 2 workers; vs torch, Grain, SPDL and the decode limit"
        ),
        samples=n,
        record_bytes=RECORD_BYTES,
        runners=tuple(runners),
        reference=reference,
        exact_batches=2,
        params={
            "records": n,
            "classes": CLASSES,
            "batch_size": BATCH_SIZE,
            "num_workers": WORKERS,
            "record": f"JPEG 256x256 -> float32 (3, {SIZE}, {SIZE})",
            "decode_limit_images_per_s": limit,
            "torch_vs_pillow_kernel_max_levels": kernels_differ,
            "folder": str(root),
            "seed": SEED,
        },
        targets=(Target("stoker", "peer_speed", 1.5), Target("stoker", "of_limit", 0.8)),
    )
