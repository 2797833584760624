"""Host-to-device throughput, stoker against PyTorch: ``python bench/h2d.py`` (needs CUDA).

Every row reads the same float32 array, in order, in batches of ``--batch-mib`` MiB
(64 rows of 1 MiB by default), and delivers each batch to the GPU:

* ``stoker pinned``: ``sk.DataLoader(sk.from_arrays(x), batch_size=64)`` through
  ``stoker.torch.to_torch(loader, device="cuda", pin_memory=True, prefetch=2)``:
  tensors sharing stoker's buffers, pinned, copied with ``non_blocking=True`` on a
  side stream two batches ahead;
* ``stoker pageable``: the same with ``pin_memory=False``;
* ``torch pin_memory``: ``torch.utils.data.DataLoader(TensorDataset(x),
  batch_size=64, pin_memory=True)``, each batch then ``.to("cuda", non_blocking=True)``,
  as PyTorch's documentation recommends;
* ``bare pinned copy``: one pinned batch copied over and over, no loading at all:
  what the link gives, the ceiling of the rows above.

The consumer of each batch only adds its float64 sum to a total on the GPU; the totals
of the loader rows must agree (the same batches arrived). A row's time runs from
asking for the first batch to ``torch.cuda.synchronize()`` after the last; GB/s is
bytes delivered / that time (1 GB = 1e9 bytes). Each row runs one untimed epoch,
then ``--repeats`` timed ones; the table shows the median and the best.

    $ python bench/h2d.py                    # 16 batches of 64 MiB per epoch, 5 repeats
    $ python bench/h2d.py --workers 2        # both loaders with 2 workers

Without CUDA it says so and exits with status 0. ``--device cpu`` runs the same
code on the host (nothing is pinned there), to try the script out.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
FORMAT = "stoker-bench-h2d/1"
ROW_BYTES = 1 << 20  # one row of the array: 1 MiB of float32
ROWS = ("stoker pinned", "stoker pageable", "torch pin_memory", "bare pinned copy")


def build_array(batches: int, batch_rows: int) -> Any:
    """``batches * batch_rows`` rows of 1 MiB of float32, filled with random numbers."""
    import numpy as np

    shape = (batches * batch_rows, ROW_BYTES // 4)
    return np.random.Generator(np.random.PCG64(0)).random(shape, dtype=np.float32)


def stoker_epoch(x: Any, batch_rows: int, workers: int, device: Any, pin: bool) -> Iterable[Any]:
    import stoker as sk
    from stoker.torch import to_torch

    loader = sk.DataLoader(
        sk.from_arrays(x),
        batch_size=batch_rows,
        num_workers=workers,
        worker_mode="thread" if workers else "inline",
    )
    return to_torch(loader, device=device, pin_memory=pin, prefetch=2)


def torch_epoch(x: Any, batch_rows: int, workers: int, device: Any, pin: bool) -> Iterable[Any]:
    import torch

    dataset = torch.utils.data.TensorDataset(torch.from_numpy(x))
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch_rows, num_workers=workers, pin_memory=pin
    )
    return (batch.to(device, non_blocking=True) for (batch,) in loader)


def bare_epoch(x: Any, batch_rows: int, workers: int, device: Any, pin: bool) -> Iterable[Any]:
    import torch

    source = torch.from_numpy(x[:batch_rows]).clone()
    if pin:
        source = source.pin_memory()
    count = len(x) // batch_rows
    return (source.to(device, non_blocking=True) for _ in range(count))


def timed(make: Callable[[], Iterable[Any]], device: Any) -> tuple[float, int, float]:
    """(seconds, bytes, checksum) of one epoch, from the first request to the last byte."""
    import torch

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    sync()
    start = time.perf_counter()
    total = torch.zeros((), dtype=torch.float64, device=device)
    nbytes = 0
    for batch in make():
        total += batch.sum(dtype=torch.float64)
        nbytes += batch.numel() * batch.element_size()
    sync()
    seconds = time.perf_counter() - start
    return seconds, nbytes, float(total.item())


def measure(args: argparse.Namespace, device: Any) -> list[dict[str, Any]]:
    x = build_array(args.batches, args.batch_rows)
    pin = device.type == "cuda"
    epochs: dict[str, Callable[[], Iterable[Any]]] = {
        "stoker pinned": lambda: stoker_epoch(x, args.batch_rows, args.workers, device, pin),
        "stoker pageable": lambda: stoker_epoch(x, args.batch_rows, args.workers, device, False),
        "torch pin_memory": lambda: torch_epoch(x, args.batch_rows, args.workers, device, pin),
        "bare pinned copy": lambda: bare_epoch(x, args.batch_rows, args.workers, device, pin),
    }
    results = []
    for name in args.rows:
        print(f"  {name}: measuring ...", file=sys.stderr, flush=True)
        timed(epochs[name], device)  # warm-up: CUDA context, pinned pools, workers
        runs = [timed(epochs[name], device) for _ in range(args.repeats)]
        rates = [nbytes / seconds / 1e9 for seconds, nbytes, _ in runs]
        results.append(
            {
                "row": name,
                "pinned": pin and name != "stoker pageable",
                "workers": 0 if name == "bare pinned copy" else args.workers,
                "bytes_per_epoch": runs[0][1],
                "seconds": [seconds for seconds, _, _ in runs],
                "gb_per_s": rates,
                "median_gb_per_s": statistics.median(rates),
                "best_gb_per_s": max(rates),
                "checksum": runs[0][2],
            }
        )
    return results


def table(results: list[dict[str, Any]]) -> str:
    """An aligned text table; each row's median against ``torch pin_memory``'s."""
    torch_rate = next(
        (r["median_gb_per_s"] for r in results if r["row"] == "torch pin_memory"), None
    )
    columns = ("row", "pinned", "workers", "GB/epoch", "median GB/s", "best GB/s", "vs torch")
    lines = [columns]
    for r in results:
        lines.append(
            (
                r["row"],
                "yes" if r["pinned"] else "no",
                str(r["workers"]),
                f"{r['bytes_per_epoch'] / 1e9:.2f}",
                f"{r['median_gb_per_s']:.2f}",
                f"{r['best_gb_per_s']:.2f}",
                "-" if not torch_rate else f"{r['median_gb_per_s'] / torch_rate:.2f}x",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    rendered = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    ]
    rendered.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(rendered)


def results_path() -> Path:
    """``bench/results/<YYYY-MM-DD>-<host>-h2d.json``."""
    host = re.sub(r"[^A-Za-z0-9_.-]+", "-", platform.node()).strip("-") or "host"
    return RESULTS / f"{datetime.date.today().isoformat()}-{host}-h2d.json"


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ROWS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {', '.join(unknown)}; choose from {', '.join(ROWS)}"
        )
    return names


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python bench/h2d.py",
        description="Host-to-device GB/s of stoker's pinned path and PyTorch's pin_memory.",
    )
    parser.add_argument("--batches", type=_positive, default=16, help="batches per epoch (16)")
    parser.add_argument(
        "--batch-mib", type=_positive, default=64, help="MiB per batch: rows of 1 MiB (64)"
    )
    parser.add_argument("--workers", type=int, default=0, help="loader workers, both loaders (0)")
    parser.add_argument("--repeats", type=_positive, default=5, help="timed epochs per row (5)")
    parser.add_argument(
        "--rows", type=_names, default=list(ROWS), help=f"comma-separated, out of {','.join(ROWS)}"
    )
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu")
    parser.add_argument("--json", type=Path, metavar="PATH", help="where to write the results")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.batch_rows = args.batch_mib
    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            "bench/h2d.py needs a CUDA GPU (torch.cuda.is_available() is False); "
            "nothing was measured"
        )
        return 0
    from stoker._bench.harness import write_json
    from stoker._bench.machine import machine_info

    machine = machine_info(torch)
    if device.type == "cuda":
        machine["gpu"] = torch.cuda.get_device_name(device)
        machine["cuda"] = torch.version.cuda
    started = time.perf_counter()
    results = measure(args, device)
    checksums = {r["checksum"] for r in results if r["row"] != "bare pinned copy"}
    same = len(checksums) <= 1
    print(
        f"stoker {machine['stoker']} | torch {machine['torch']} | python {machine['python']} | "
        f"{machine.get('gpu', args.device)} | {args.batches} batches of {args.batch_mib} MiB, "
        f"{args.workers} workers"
    )
    print(table(results))
    print(f"same batches delivered by every loader: {'yes' if same else 'NO'}")
    path = args.json or results_path()
    document = {
        "format": FORMAT,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "settings": {
            "batches": args.batches,
            "batch_mib": args.batch_mib,
            "workers": args.workers,
            "repeats": args.repeats,
            "device": args.device,
        },
        "results": results,
        "same_batches": same,
        "total_seconds": time.perf_counter() - started,
    }
    write_json(path, document)
    print(f"wrote {path}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
