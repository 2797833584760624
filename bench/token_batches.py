"""Token-budget batches against fixed batches: ``python bench/token_batches.py``.

200k records of int32 tokens (lengths uniform in 16-1024, and a long-tailed
distribution), one epoch each, measured in the same run:

* ``fixed 32``: ``sk.DataLoader(batch_size=32, shuffle=True)`` padded to each batch's
  longest (``sk.pad_collate``); the PyTorch DataLoader the same way;
* ``grouped 32``: transformers' ``LengthGroupedSampler`` (``group_by_length=True``)
  with batch 32, padded to the longest;
* ``tokens 16k``: ``sk.TokenBatchSampler(lengths, max_tokens=16384)``, padded to the
  longest.

For each: padded-token efficiency (real tokens / padded tokens) and real tokens per
second delivered (the median of ``--repeats`` epochs), by the loader alone and by the
loader feeding a step whose cost grows with the padded tokens, as a model's does (an
embedding lookup of every padded position, 32 floats each, summed). Then the order
ledger: the time of ``loader.batch_indices(0, step)`` for a step late in an epoch of 1M records, the
first call (which computes the epoch's order) and the median of later calls.

Prints a table and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk

MAX_TOKENS = 16384


def lengths_of(kind: str, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.integers(16, 1025, n)
    # long-tailed: most records short, a few near the top (lognormal, clipped)
    return np.clip(rng.lognormal(mean=5.0, sigma=0.9, size=n), 16, 4096).astype(np.int64)


def dataset(lengths: np.ndarray) -> Any:
    import pyarrow as pa

    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = pa.array(np.arange(offsets[-1], dtype=np.int64) % 30_000, type=pa.int32())
    tokens = pa.ListArray.from_arrays(pa.array(offsets), values)
    return sk.from_arrow(pa.table({"tokens": tokens}))


EMBEDDING = np.random.default_rng(0).standard_normal((30_000, 32)).astype(np.float32)


def _epoch(loader: Any, step: bool) -> tuple[float, int, int]:
    real = padded = 0
    start = time.perf_counter()
    for batch in loader:
        arr = np.asarray(batch["tokens"])
        mask = np.asarray(batch["tokens_mask"])
        real += int(mask.sum())
        padded += int(np.prod(arr.shape))
        if step:  # a model's first layer: every padded position is looked up
            EMBEDDING[arr].sum()
    return time.perf_counter() - start, real, padded


def run_case(kind: str, n: int, repeats: int, workers: int, step: bool) -> list[dict[str, Any]]:
    lengths = lengths_of(kind, n)
    ds = dataset(lengths)
    pad = functools.partial(sk.pad_collate, mask=True)
    loaders: dict[str, Any] = {
        "stoker fixed 32": sk.DataLoader(
            ds, batch_size=32, shuffle=True, collate_fn=pad, num_workers=workers
        ),
        "stoker tokens 16k": sk.DataLoader(
            ds,
            batch_sampler=sk.TokenBatchSampler(lengths, MAX_TOKENS),
            collate_fn=pad,
            num_workers=workers,
        ),
    }
    try:
        import torch.utils.data as tud

        loaders["torch fixed 32"] = tud.DataLoader(
            ds, batch_size=32, shuffle=True, collate_fn=pad, num_workers=workers
        )
    except ImportError:
        pass
    try:
        from transformers.trainer_pt_utils import LengthGroupedSampler

        sampler = LengthGroupedSampler(32, lengths=lengths.tolist())
        loaders["stoker + HF grouped 32"] = sk.DataLoader(
            ds, batch_size=32, sampler=sampler, collate_fn=pad, num_workers=workers
        )
    except ImportError:
        pass
    rows = []
    for name, loader in loaders.items():
        times, eff = [], 0.0
        real = 0
        for _ in range(repeats):
            seconds, real, padded = _epoch(loader, step)
            times.append(seconds)
            eff = real / padded
        median = statistics.median(times)
        rows.append(
            {
                "lengths": kind,
                "loader": name,
                "with_step": step,
                "efficiency": eff,
                "real_tokens_per_s": real / median,
                "epoch_s": median,
                "epochs_s": times,
            }
        )
        if hasattr(loader, "close"):
            loader.close()
    base = next(r for r in rows if r["loader"] == "stoker fixed 32")  # same run, same step
    for row in rows:
        row["tokens_per_s_vs_fixed"] = row["real_tokens_per_s"] / base["real_tokens_per_s"]
    return rows


def ledger(n: int = 1_000_000, repeats: int = 200) -> dict[str, Any]:
    loader = sk.DataLoader(sk.range(0, n), batch_size=32, shuffle=True)
    step = n // 32 - 5
    start = time.perf_counter()
    loader.batch_indices(0, step)
    first = time.perf_counter() - start
    later = []
    for i in range(repeats):
        start = time.perf_counter()
        loader.batch_indices(0, step - i)
        later.append(time.perf_counter() - start)
    lengths = lengths_of("uniform", n)
    tok = sk.DataLoader(
        sk.range(0, n), batch_sampler=sk.TokenBatchSampler(lengths, MAX_TOKENS), collate_fn=list
    )
    start = time.perf_counter()
    steps = len(tok)
    tok.batch_indices(0, steps - 5)
    tok_first = time.perf_counter() - start
    tok_later = []
    for i in range(repeats):
        start = time.perf_counter()
        tok.batch_indices(0, steps - 5 - i % steps)
        tok_later.append(time.perf_counter() - start)
    return {
        "records": n,
        "shuffle_first_s": first,
        "shuffle_later_median_s": statistics.median(later),
        "tokens_first_s": tok_first,
        "tokens_later_median_s": statistics.median(tok_later),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for step in (False, True):
        for kind in ("uniform", "long-tailed"):
            rows += run_case(kind, args.records, args.repeats, args.workers, step)
    print(
        f"{'lengths':<12} {'loader':<24} {'step':>5} {'efficiency':>10} {'real tok/s':>12} "
        f"{'vs fixed':>9}"
    )
    for r in rows:
        print(
            f"{r['lengths']:<12} {r['loader']:<24} {'yes' if r['with_step'] else 'no':>5} "
            f"{r['efficiency']:>10.3f} {r['real_tokens_per_s']:>12,.0f} "
            f"{r['tokens_per_s_vs_fixed']:>8.2f}x"
        )
    led = ledger()
    print(
        f"ledger, {led['records']:,} records: batch_indices first call "
        f"{led['shuffle_first_s'] * 1e3:.1f} ms, "
        f"later {led['shuffle_later_median_s'] * 1e6:.0f} us "
        f"(shuffle); token sampler first {led['tokens_first_s'] * 1e3:.0f} ms, later "
        f"{led['tokens_later_median_s'] * 1e6:.0f} us"
    )
    if args.out is not None:
        args.out.write_text(json.dumps({"rows": rows, "ledger": led}, indent=2))


if __name__ == "__main__":
    main()
