"""``jpeg``: read, decode and augment 4,000 generated 256x256 RGB JPEGs, batch 64, 2 workers.

Every record goes through the usual image-classification input pipeline: read the
file's bytes, decode them with Pillow, take a random 224x224 crop, flip it left to
right with probability 1/2, and normalise it to float32 CHW with the ImageNet mean
and standard deviation. The random draws come from stoker's per-record generator
(``map(..., seeded=True)``); torch's dataset calls the same functions with
:func:`stoker._rng.record_rng` for the same (seed, epoch 0, index), so both loaders
produce the same batches, bit for bit, in stoker's epoch-0 shuffled order.

Rows: ``stoker auto`` (every function is marked with :func:`stoker.releases_gil`, as
file reads, Pillow's decoder and NumPy arithmetic release the GIL, so ``auto`` picks
thread workers), ``stoker auto unmarked`` (the same functions unmarked, so ``auto``
isolates them in process workers from the first batch on),
``stoker all auto`` (``num_workers="auto", prefetch="auto"``), the hand-picked
settings ``stoker {thread,process} {1,2,4}``, ``torch``, and, where installed,
``grain threads`` and ``spdl`` (2 threads each), 2 workers unless named. Every run
also measures the time to the first batch of a fresh loader.

The images are written once into the cache folder and reused: image ``i`` is a
smooth random field from ``PCG64([SEED, i])`` plus a little noise, saved at quality
90 (about 18 KB, like a photo of that size). ``--quick`` uses 1,000 of them.
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np

import stoker as sk
from stoker._rng import record_rng

from ..base import BenchContext, Prepared, Runner, Target
from . import workload
from ._common import OrderSampler, index_batches

IMAGES = 4000
QUICK_IMAGES = 1000
SIZE = 256
CROP = 224
BATCH_SIZE = 64
WORKERS = 2
SEED = 0
QUALITY = 90
RECORD_BYTES = 3 * CROP * CROP * 4
# ImageNet statistics, scaled to the 0-255 range of the decoded pixels.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
INV_STD = (1 / (0.229 * 255), 1 / (0.224 * 255), 1 / (0.225 * 255))


def _image(index: int) -> bytes:
    """The JPEG file of image ``index``: the same bytes for the same Pillow build."""
    from PIL import Image

    rng = np.random.Generator(np.random.PCG64([SEED, index]))
    coarse = Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    smooth = np.asarray(coarse.resize((SIZE, SIZE), Image.Resampling.BICUBIC), dtype=np.int16)
    noise = rng.integers(-10, 11, (SIZE, SIZE, 3), dtype=np.int16)
    pixels = np.clip(smooth + noise, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=QUALITY)
    return out.getvalue()


def image_files(cache_dir: Path, count: int, log: Any) -> list[str]:
    """The paths of images ``0 .. count - 1``, writing the missing ones first.

    Each file is written under a temporary name and renamed, so an interrupted run
    leaves no half-written image behind.
    """
    folder = cache_dir / f"jpeg-{SIZE}"
    paths = [folder / f"{i:06d}.jpg" for i in range(count)]
    missing = [i for i, path in enumerate(paths) if not path.is_file()]
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
        log(f"jpeg: writing {len(missing)} JPEG files to {folder} (reused by later runs)")
        start = time.perf_counter()
        for i in missing:
            tmp = paths[i].with_name(f"{paths[i].name}.{os.getpid()}.tmp")
            tmp.write_bytes(_image(i))
            os.replace(tmp, paths[i])
        log(f"jpeg: wrote them in {time.perf_counter() - start:.1f} s")
    return [str(path) for path in paths]


@sk.releases_gil
def read_file(path: str) -> bytes:
    """The bytes of the file at ``path``."""
    with open(path, "rb") as f:
        return f.read()


@sk.releases_gil
def decode(data: bytes) -> np.ndarray:
    """A JPEG file's bytes decoded with Pillow into uint8 HWC RGB pixels."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        return np.asarray(rgb)


@sk.releases_gil
def augment(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random 224x224 crop, flipped left to right half of the time, as normalised float32 CHW."""
    top, left = rng.integers(0, image.shape[0] - CROP + 1, size=2).tolist()
    crop = image[top : top + CROP, left : left + CROP]
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    out = np.empty((3, CROP, CROP), dtype=np.float32)
    for c in range(3):
        np.subtract(crop[:, :, c], np.float32(MEAN[c]), out=out[c], dtype=np.float32)
        out[c] *= np.float32(INV_STD[c])
    return out


def transform(path: str, rng: np.random.Generator) -> np.ndarray:
    """The whole per-record pipeline, as torch's dataset and the reference run it."""
    return augment(decode(read_file(path)), rng)


def pipeline(paths: list[str]) -> sk.Dataset[np.ndarray]:
    """stoker's dataset: the file list, then read, decode and augment (seeded)."""
    return sk.from_sequence(paths).map(read_file).map(decode).map(augment, seeded=True)


def unmarked_pipeline(paths: list[str]) -> sk.Dataset[np.ndarray]:
    """The same pipeline with functions stoker cannot tell release the GIL."""

    def load(path: str, rng: np.random.Generator) -> np.ndarray:
        return transform(path, rng)

    return sk.from_sequence(paths).map(load, seeded=True)


def peer_runners(paths: list[str], order: np.ndarray) -> list[Runner]:
    """Grain (threads) and SPDL on the same function, where they are installed."""
    import importlib

    runners: list[Runner] = []
    try:
        grain: Any = importlib.import_module("grain")
    except ImportError:
        grain = None
    if grain is not None:

        def grain_loader() -> Any:
            ds = grain.MapDataset.source([int(i) for i in order])
            ds = ds.map(lambda i: transform(paths[i], record_rng(SEED, 0, i)))
            ds = ds.batch(BATCH_SIZE)
            return ds.to_iter_dataset(
                grain.ReadOptions(num_threads=WORKERS, prefetch_buffer_size=256)
            )

        runners.append(Runner("grain threads", "bare", grain_loader))
    try:
        builder: Any = importlib.import_module("spdl.pipeline").PipelineBuilder
    except ImportError:
        builder = None
    if builder is not None:

        def load(i: int) -> np.ndarray:
            return transform(paths[i], record_rng(SEED, 0, i))

        class Epoch:
            def __iter__(self) -> Any:
                pipe = (
                    builder()
                    .add_source([int(i) for i in order])
                    .pipe(load, concurrency=WORKERS, output_order="input")
                    .aggregate(BATCH_SIZE, drop_last=False)
                    .pipe(np.stack)
                    .add_sink(4)
                    .build(num_threads=WORKERS)
                )
                with pipe.auto_stop():
                    yield from pipe

        runners.append(Runner("spdl", "bare", Epoch))
    return runners


class TorchJpegs:
    """A map-style dataset for torch: record ``i`` is :func:`transform` of file ``i``.

    It draws from ``record_rng(seed, 0, i)``, the generator stoker's seeded map gives
    record ``i`` in epoch 0, so it matches stoker's first epoch.
    """

    def __init__(self, paths: list[str], seed: int) -> None:
        self._paths = paths
        self._seed = seed

    def __len__(self) -> int:
        return len(self._paths)

    def __getitem__(self, index: int) -> np.ndarray:
        return transform(self._paths[index], record_rng(self._seed, 0, index))


def count_images(ctx: BenchContext) -> int:
    """How many images the workload reads under the context's quick and scale options."""
    return max(1, int((QUICK_IMAGES if ctx.quick else IMAGES) * ctx.scale))


@workload(
    "jpeg",
    "4,000 256x256 JPEGs (1,000 with --quick): read, decode, random crop 224 + flip, "
    "batch 64, 2 workers",
)
def prepare(ctx: BenchContext) -> Prepared:
    """Write (or reuse) the images; every loader reads them in stoker's epoch-0 order."""
    n = count_images(ctx)
    paths = image_files(ctx.cache_dir, n, ctx.log)
    order = sk.RandomSampler(n, seed=SEED).cursor(epoch=0).take(n)
    batches = index_batches(order, BATCH_SIZE)
    runners: list[Runner] = []
    if ctx.wants("stoker"):
        dataset, unmarked = pipeline(paths), unmarked_pipeline(paths)

        def stoker_loader(
            mode: Literal["auto", "process", "thread"],
            workers: Any = WORKERS,
            data: Any = dataset,
            prefetch: Any = None,
        ) -> Any:
            def make() -> Any:
                return sk.DataLoader(
                    data,
                    batch_size=BATCH_SIZE,
                    shuffle=True,
                    seed=SEED,
                    num_workers=workers,
                    worker_mode=mode,
                    prefetch=prefetch,
                )

            return make

        runners += [
            Runner("stoker auto", "stoker", stoker_loader("auto"), show_mode=True),
            Runner(
                "stoker auto unmarked",
                "stoker",
                stoker_loader("auto", data=unmarked),
                show_mode=True,
            ),
            Runner(
                "stoker all auto",
                "stoker",
                stoker_loader("auto", "auto", prefetch="auto"),
                show_mode=True,
            ),
            Runner("stoker process", "stoker", stoker_loader("process")),
            Runner("stoker thread", "stoker", stoker_loader("thread")),
        ]
        if not ctx.quick and ctx.scale >= 0.25:  # the hand-picked settings to beat
            for mode in ("thread", "process"):
                for workers in (1, 4):
                    runners.append(
                        Runner(f"stoker {mode} {workers}", "stoker", stoker_loader(mode, workers))
                    )
    if ctx.wants("torch"):
        torch, records, sampler = ctx.torch, TorchJpegs(paths, SEED), OrderSampler(order)

        def torch_loader() -> Any:
            return torch.utils.data.DataLoader(
                records, batch_size=BATCH_SIZE, sampler=sampler, num_workers=WORKERS
            )

        runners.append(Runner("torch", "torch", torch_loader))
    if ctx.wants("bare"):
        runners += peer_runners(paths, order)

    def reference() -> Any:
        for idx in batches:
            yield np.stack([transform(paths[i], record_rng(SEED, 0, i)) for i in idx.tolist()])

    return Prepared(
        summary=(
            f"{n:,} {SIZE}x{SIZE} JPEGs: read, decode, random crop {CROP} + flip, "
            f"batch {BATCH_SIZE}, {WORKERS} workers"
        ),
        samples=n,
        record_bytes=RECORD_BYTES,
        runners=tuple(runners),
        reference=reference,
        params={
            "records": n,
            "batch_size": BATCH_SIZE,
            "num_workers": WORKERS,
            "record": f"JPEG {SIZE}x{SIZE} RGB -> float32 (3, {CROP}, {CROP})",
            "folder": str(Path(paths[0]).parent),
            "seed": SEED,
        },
        warm_epoch=True,
        targets=(
            Target("stoker auto", "speed", 1.5),
            Target("stoker auto", "first_batch", 0.5),
            Target("stoker auto unmarked", "first_batch", 0.6),
            Target("stoker process", "first_batch", 1.5),
        ),
    )
