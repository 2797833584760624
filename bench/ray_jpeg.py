"""Ray actors against process workers on the JPEG workload: ``python bench/ray_jpeg.py``.

The pipeline is ``stoker bench``'s ``jpeg`` workload (read, decode with Pillow,
random 224 crop + flip, normalise; batch 64), read by 2 workers, shuffled. Both rows
run in the same process, taking turns round after round, so machine noise hits both
alike; the table shows medians over the rounds:

* ``first batch``: from building the loader to its first batch (workers start);
* ``images/s``: one whole epoch of a loader whose workers are already running
  (its second epoch).

A local Ray instance is started once before the rounds (``ray.init(num_cpus=...)``,
not timed: a training job pays for it once), so ``ray`` rows measure the actors and
the object store, not the cluster's start. Every round also checks that both modes
yield the same batches, bit for bit.

    $ python bench/ray_jpeg.py                   # 4,000 images, 5 rounds
    $ python bench/ray_jpeg.py --quick --rounds 3 --json /tmp/ray.json

Needs Pillow and Ray (``pip install 'stoker[ray,images]'``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk
from stoker._bench.harness import default_cache_dir
from stoker._bench.workloads import jpeg

MODES = ("process", "ray")


def _loader(dataset: Any, mode: str) -> sk.DataLoader[Any]:
    return sk.DataLoader(
        dataset,
        batch_size=jpeg.BATCH_SIZE,
        shuffle=True,
        seed=jpeg.SEED,
        num_workers=jpeg.WORKERS,
        worker_mode=mode,  # type: ignore[arg-type]
    )


def _round(dataset: Any, mode: str, images: int) -> tuple[float, float, str]:
    """(seconds to the first batch, images/s of a warm epoch, digest of that epoch)."""
    start = time.perf_counter()
    with _loader(dataset, mode) as loader:
        it = iter(loader)
        next(it)
        first = time.perf_counter() - start
        for _ in it:
            pass
        digest = hashlib.sha256()
        start = time.perf_counter()
        for batch in loader:
            digest.update(np.ascontiguousarray(batch).tobytes())
        epoch = time.perf_counter() - start
    return first, images / epoch, digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 images instead of 4,000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args(argv)
    import ray

    count = jpeg.QUICK_IMAGES if args.quick else jpeg.IMAGES
    paths = jpeg.image_files(default_cache_dir(), count, print)
    dataset = jpeg.pipeline(paths)
    start = time.perf_counter()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - start
    rows: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    try:
        for r in range(args.rounds):
            digests = set()
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                first, rate, digest = _round(dataset, mode, count)
                rows[mode].append((first, rate))
                digests.add(digest)
                print(f"round {r} {mode:8s} first batch {first * 1e3:6.0f} ms {rate:6.0f} images/s")
            if len(digests) != 1:
                print("error: the modes yielded different batches", file=sys.stderr)
                return 1
    finally:
        ray.shutdown()
    result: dict[str, Any] = {
        "images": count,
        "workers": jpeg.WORKERS,
        "rounds": args.rounds,
        "ray_init_seconds": ray_start,
        "cpus": os.cpu_count(),
        "ray": ray.__version__,
    }
    print(f"\n{count} images, {jpeg.WORKERS} workers, medians of {args.rounds} rounds")
    print(f"{'mode':10s} {'first batch':>12s} {'images/s':>10s}")
    for mode in MODES:
        first = statistics.median(f for f, _ in rows[mode])
        rate = statistics.median(r for _, r in rows[mode])
        result[mode] = {"first_batch_ms": first * 1e3, "images_per_second": rate}
        print(f"{mode:10s} {first * 1e3:10.0f} ms {rate:10.0f}")
    ratio = result["ray"]["images_per_second"] / result["process"]["images_per_second"]
    result["ray_over_process"] = ratio
    print(f"ray / process throughput: {ratio:.2f} (ray.init took {ray_start:.1f} s, not counted)")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
