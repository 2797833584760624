"""One stoker epoch of the table workloads' loaders alone: ``python bench/table_epochs.py``.

Reads the files ``stoker bench --workloads parquet_numeric,tokens_pad`` wrote into
the bench cache (run it once first), the way its ``stoker x0`` / ``stoker x2`` rows
do, without torch, verification or the harness:

* ``parquet_numeric``: ``sk.from_parquet(path, cache_dir=<cache>/parquet-decoded)``,
  ``ds.shuffle_sampler(0)``, batch 1024 (14.9 M rows, 17 numeric columns);
* ``tokens_pad``: the token file the same way, batch 32,
  ``partial(sk.pad_collate, max_length=512)``.

Every epoch is timed in wall-clock and process CPU seconds; the line gives the
minimum of ``--repeats`` epochs and the time per batch (on a shared machine the CPU
time is the steadier of the two). To compare two trees, run it alternately with
each on ``PYTHONPATH`` (the line names the tree it imported)::

    $ PYTHONPATH=src python bench/table_epochs.py --workers 0 --repeats 3
    $ PYTHONPATH=/other/tree/src python bench/table_epochs.py --workers 0 --repeats 3
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from pathlib import Path
from typing import Any

import stoker as sk

NUMERIC = "numeric-16xf32-i64-14913080-g262144.parquet"
TOKENS = "tokens-int32-500000-g8192.parquet"


def _loader(name: str, cache: Path, workers: int) -> tuple[Any, str]:
    ds = sk.from_parquet(cache / name, cache_dir=cache / "parquet-decoded")
    ds.write_cache()
    sampler = ds.shuffle_sampler(0)
    if name == NUMERIC:
        loader = sk.DataLoader(ds, batch_size=1024, sampler=sampler, num_workers=workers)
        return loader, "label"
    pad = functools.partial(sk.pad_collate, max_length=512)
    loader = sk.DataLoader(ds, batch_size=32, sampler=sampler, num_workers=workers, collate_fn=pad)
    return loader, "tokens"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default="parquet_numeric,tokens_pad")
    default_cache = Path(os.environ.get("STOKER_CACHE", Path.home() / ".cache/stoker")) / "bench"
    parser.add_argument("--cache-dir", type=Path, default=default_cache)
    args = parser.parse_args()
    tree = sk.__file__.split("/src/stoker")[0]
    files = {"parquet_numeric": NUMERIC, "tokens_pad": TOKENS}
    for workload in args.workloads.split(","):
        loader, field = _loader(files[workload], args.cache_dir, args.workers)
        walls, cpus, batches, mode = [], [], 0, ""
        for _ in range(args.repeats):
            wall, cpu, batches = time.perf_counter(), time.process_time(), 0
            it = iter(loader)
            for batch in it:
                batches += 1 if len(batch[field]) else 0
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            mode = it.stats().worker_mode
            del it
        loader.close()
        print(
            f"{workload} x{args.workers} ({mode}) {tree}: {batches} batches, "
            f"wall min {min(walls):.3f} s ({min(walls) / batches * 1e6:.0f} us/batch), "
            f"cpu min {min(cpus):.3f} s ({min(cpus) / batches * 1e6:.0f} us/batch)"
        )


if __name__ == "__main__":
    main()
