"""The ``stoker`` command line.

Subcommands register themselves in :func:`build_parser`; each one gets a handler that
takes the parsed arguments and returns the exit status. Heavy imports happen inside
the handlers, so ``stoker --help`` stays fast.

Example:
    $ stoker bench --quick
    $ stoker bench --workloads ints,memmap --repeats 5 --json results.json
    $ stoker bench --quick --plot results.png
    $ stoker bench plot results.json -o results.png
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Sequence
from pathlib import Path

from ._explain import add_explain

__all__ = ["build_parser", "main"]

_LOADERS = ("stoker", "torch", "bare")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _add_bench(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = commands.add_parser(
        "bench",
        help="compare stoker with the PyTorch DataLoader on built-in workloads",
        description=(
            "Time stoker, the PyTorch DataLoader (when installed) and bare NumPy on the "
            "same built-in workloads, check that they produced the same batches, and "
            "print a table. The data is generated once into a cache folder. Exits 1 "
            "when any loader's batches differ."
        ),
    )
    bench.add_argument("--quick", action="store_true", help="2 repeats and a 256 MB memmap")
    bench.add_argument("--json", type=Path, metavar="PATH", help="also write the results here")
    bench.add_argument(
        "--workloads",
        type=_names,
        metavar="A,B",
        help="comma-separated workloads (default: all but those --list marks 'run by name')",
    )
    bench.add_argument(
        "--loaders",
        type=_names,
        metavar="A,B",
        help=f"comma-separated loaders out of {','.join(_LOADERS)} (default: all)",
    )
    bench.add_argument(
        "--repeats", type=_positive_int, metavar="N", help="timed epochs per loader (default 3)"
    )
    bench.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="where generated data is kept (default $STOKER_CACHE/bench or ~/.cache/stoker/bench)",
    )
    bench.add_argument(
        "--plot",
        type=Path,
        metavar="PNG",
        help="also draw the results into this PNG file (needs matplotlib: stoker[plot])",
    )
    bench.add_argument("--list", action="store_true", help="list the workloads and exit")
    # Multiplies every data size; the test suite runs the command on tiny data with it.
    bench.add_argument("--scale", type=_positive_float, default=1.0, help=argparse.SUPPRESS)
    bench.set_defaults(handler=_bench, parser=bench)
    sub = bench.add_subparsers(dest="bench_command", metavar="plot")
    plot = sub.add_parser(
        "plot",
        help="draw saved results (stoker bench --json) as a PNG",
        description="Draw the JSON results of stoker bench --json as a PNG: one panel per "
        "workload, a bar per loader with its samples/s.",
    )
    plot.add_argument("results", type=Path, help="a JSON file written by stoker bench --json")
    plot.add_argument(
        "-o", "--output", type=Path, metavar="PNG", help="the PNG to write (default: beside it)"
    )
    plot.set_defaults(handler=_plot, parser=plot)


def _plot(args: argparse.Namespace) -> int:
    import json

    from ._bench.plot import plot_results

    parser: argparse.ArgumentParser = args.parser
    try:
        document = json.loads(args.results.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        parser.error(f"cannot read {args.results}: {exc}")
    output = args.output or args.results.with_suffix(".png")
    print(f"wrote {plot_results(document, output)}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.parser
    from ._bench import harness
    from ._bench.workloads import available

    registry = available()
    if args.list:
        width = max(len(name) for name in registry)
        for name, workload in registry.items():
            note = "" if workload.default else " (run by name)"
            print(f"{name.ljust(width)}  {workload.summary}{note}")
        return 0
    workloads = args.workloads or [name for name, w in registry.items() if w.default]
    unknown = [name for name in workloads if name not in registry]
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}; choose from {', '.join(registry)}")
    missing = {m: extra for name in workloads for m, extra in registry[name].missing()}
    if missing:
        needs = [name for name in workloads if registry[name].missing()]
        extras = ",".join(sorted(set(missing.values())))
        parser.error(
            f"workload {', '.join(needs)} needs {', '.join(missing)}, not installed: "
            f"pip install 'stoker[{extras}]'"
        )
    if args.plot is not None and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib, not installed: pip install 'stoker[plot]'")
    loaders = args.loaders or list(_LOADERS)
    unknown = [name for name in loaders if name not in _LOADERS]
    if unknown:
        parser.error(f"unknown loader {', '.join(unknown)}; choose from {', '.join(_LOADERS)}")
    settings = harness.Settings(
        repeats=args.repeats or (2 if args.quick else 3),
        quick=args.quick,
        workloads=tuple(dict.fromkeys(workloads)),
        loaders=frozenset(loaders),
        cache_dir=args.cache_dir or harness.default_cache_dir(),
        json_path=args.json,
        scale=args.scale,
        plot_path=args.plot,
    )
    return harness.run(settings)


def build_parser() -> argparse.ArgumentParser:
    """The ``stoker`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="stoker", description="stoker: a deterministic, exactly resumable data loader."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_bench(commands)
    add_explain(commands)
    return parser


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``stoker`` command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
