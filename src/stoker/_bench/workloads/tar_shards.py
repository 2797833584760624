"""``tar_shards``: 8 tar shards of 500 samples (16 KB payload + class), batch 64, 2 workers.

The shards are in the WebDataset layout: sample ``j`` of shard ``s`` is the members
``{s}{j:06d}.bin`` (16 KB of random bytes, standing for an encoded image) and
``{s}{j:06d}.cls`` (its class, as text). Each loader groups the members into
samples, turns each sample into one uint8 record (the payload, then the class as 8
little-endian bytes) and stacks 64 of them.

The payload is not decoded: decoding a JPEG costs the same in every loader and
would hide the part that differs (reading the tar stream, grouping members,
handing batches between workers and the caller); the ``jpeg`` and ``image_folder``
workloads measure decoding.

Rows, all with 2 workers, each worker reading every second shard: ``stoker auto``
(threads: the source and the map, NumPy copies, are marked as releasing the GIL),
``stoker thread``, ``stoker process`` (``sk.from_tar_shards``), and ``webdataset``:
``wds.WebDataset`` split by worker, fed to the PyTorch DataLoader (left out, with a
message, when webdataset or torch is not installed). Both interleave the workers'
batches in turn, so every loader yields the same batches in the same order.
``--quick`` uses 8 shards of 125 samples.
"""

from __future__ import annotations

import importlib
import io
import os
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, Target
from . import workload

SHARDS = 8
PER_SHARD = 500
QUICK_PER_SHARD = 125
PAYLOAD = 16 * 1024
BATCH_SIZE = 64
WORKERS = 2
SEED = 0
RECORD_BYTES = PAYLOAD + 8


def _write_shard(path: Path, shard: int, count: int) -> None:
    rng = np.random.Generator(np.random.PCG64([SEED, shard]))
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with tarfile.open(tmp, "w") as tar:
        for j in range(count):
            for field, data in (
                ("bin", rng.bytes(PAYLOAD)),
                ("cls", str((shard * 7 + j) % 1000).encode()),
            ):
                info = tarfile.TarInfo(f"{shard}{j:06d}.{field}")
                info.size = len(data)
                info.mtime = 0
                tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)


def tar_shards(cache_dir: Path, per_shard: int, log: Any) -> list[str]:
    """The shard paths, writing the missing ones first (reused by later runs)."""
    folder = cache_dir / f"tar-shards-{per_shard}"
    paths = [folder / f"shard-{s:04d}.tar" for s in range(SHARDS)]
    missing = [s for s, path in enumerate(paths) if not path.is_file()]
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
        log(f"tar_shards: writing {len(missing)} shards to {folder} (reused by later runs)")
        start = time.perf_counter()
        for s in missing:
            _write_shard(paths[s], s, per_shard)
        log(f"tar_shards: wrote them in {time.perf_counter() - start:.1f} s")
    return [str(path) for path in paths]


@sk.releases_gil
def to_record(sample: dict[str, Any]) -> np.ndarray:
    """One sample as uint8: the payload, then its class as 8 little-endian bytes."""
    out = np.empty(RECORD_BYTES, dtype=np.uint8)
    out[:PAYLOAD] = np.frombuffer(sample["bin"], dtype=np.uint8)
    out[PAYLOAD:] = np.array([int(sample["cls"])], dtype="<i8").view(np.uint8)
    return out


def _expected(paths: list[str]) -> Iterator[np.ndarray]:
    """Worker k reads shards k, k + 2, ...; the workers' batches alternate."""
    from stoker._sources.tar_shards import read_samples

    parts = []
    for k in range(WORKERS):
        records = [to_record(s) for path in paths[k::WORKERS] for s in read_samples(path)]
        parts.append([records[i : i + BATCH_SIZE] for i in range(0, len(records), BATCH_SIZE)])
    for i in range(max(len(p) for p in parts)):
        for part in parts:
            if i < len(part):
                yield np.stack(part[i])


def _webdataset_runner(ctx: BenchContext, paths: list[str]) -> Runner | None:
    try:
        wds = importlib.import_module("webdataset")  # optional: a peer, not a dependency
    except ImportError:
        return None
    torch = ctx.torch

    def make() -> Any:
        dataset = wds.WebDataset(
            paths,
            shardshuffle=False,
            nodesplitter=None,
            workersplitter=wds.split_by_worker,
            empty_check=False,
        ).map(to_record)
        return torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, num_workers=WORKERS)

    return Runner("webdataset", "torch", make)


@workload(
    "tar_shards",
    "8 tar shards (WebDataset layout), 4,000 samples (1,000 with --quick) of 16 KB + class, "
    "batch 64, 2 workers; "
    "vs webdataset fed to the PyTorch DataLoader",
    default=False,
)
def prepare(ctx: BenchContext) -> Prepared:
    """Write (or reuse) the shards; every loader reads them with 2 workers."""
    per_shard = max(1, int((QUICK_PER_SHARD if ctx.quick else PER_SHARD) * ctx.scale))
    paths = tar_shards(ctx.cache_dir, per_shard, ctx.log)
    runners: list[Runner] = []
    if ctx.wants("stoker"):
        dataset = sk.from_tar_shards(paths).map(to_record)

        def stoker_loader(mode: Literal["auto", "thread", "process"]) -> Any:
            def make() -> Any:
                return sk.DataLoader(
                    dataset, batch_size=BATCH_SIZE, num_workers=WORKERS, worker_mode=mode
                )

            return make

        runners += [
            Runner("stoker auto", "stoker", stoker_loader("auto"), show_mode=True),
            Runner("stoker thread", "stoker", stoker_loader("thread")),
            Runner("stoker process", "stoker", stoker_loader("process")),
        ]
    if ctx.wants("torch"):
        runner = _webdataset_runner(ctx, paths)
        if runner is None:
            ctx.log("tar_shards: webdataset is not installed: its row is left out")
        else:
            runners.append(runner)
    elif "torch" in ctx.loaders:
        ctx.log("tar_shards: torch is not installed: the webdataset row is left out")
    return Prepared(
        summary=(
            f"{SHARDS} tar shards (WebDataset layout), {SHARDS * per_shard:,} samples of "
            "16 KB + class, batch 64, 2 workers; vs webdataset fed to the PyTorch DataLoader"
        ),
        samples=SHARDS * per_shard,
        record_bytes=RECORD_BYTES,
        runners=tuple(runners),
        reference=lambda: _expected(paths),
        exact_batches=4,
        params={
            "shards": SHARDS,
            "samples_per_shard": per_shard,
            "batch_size": BATCH_SIZE,
            "num_workers": WORKERS,
            "record": f"{PAYLOAD} B payload + class -> uint8 ({RECORD_BYTES},)",
            "folder": str(Path(paths[0]).parent),
        },
        targets=(Target("stoker auto", "speed", 1.5),),
    )
