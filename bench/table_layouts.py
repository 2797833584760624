"""Parquet layouts read with nothing tuned: ``python bench/table_layouts.py``.

Reads the 200,000 token lists that ``stoker bench --workloads tokens_pad_defaults``
wrote into the bench cache (run it once first) as pyarrow wrote them (one row group),
and rewritten with 1,000-row and 100,000-row groups, each with
``sk.from_parquet(path)``, ``shuffle=True``, padded to 512, batch 32, 0 and 2
workers. Prints the first epoch's seconds (it writes the decoded copy when the data
are larger than the decode cache) and the median rows/s of 3 epochs.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

import stoker as sk

BENCH = Path.home() / ".cache" / "stoker" / "bench"
SOURCE = BENCH / "tokens-defaults-200000.parquet"


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    layouts = {
        "one row group (pyarrow's defaults)": (SOURCE, None),
        "many small (200 groups of 1,000 rows)": (out / "g1000.parquet", 1000),
        "a few huge (2 groups of 100,000 rows)": (out / "g100k.parquet", 100_000),
    }
    for path, size in layouts.values():
        if size and not path.exists():
            pq.write_table(pq.read_table(SOURCE), path, row_group_size=size)
    pad = functools.partial(sk.pad_collate, max_length=512)
    for name, (path, _) in layouts.items():
        for workers in (0, 2):
            ds = sk.from_parquet(path)
            loader = sk.DataLoader(
                ds, batch_size=32, shuffle=True, seed=0, num_workers=workers, collate_fn=pad
            )
            rates = []
            for _ in range(3):
                start = time.perf_counter()
                rows = sum(len(batch["tokens"]) for batch in loader)
                rates.append(rows / (time.perf_counter() - start))
            print(
                f"{name:40s} x{workers}: first epoch {len(ds) / rates[0]:6.2f} s; "
                f"median {sorted(rates)[1]:9,.0f} rows/s",
                flush=True,
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else BENCH / "layouts")
