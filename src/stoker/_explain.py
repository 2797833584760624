"""``stoker explain``: which records each step of an epoch holds, as JSON lines.

Example:
    $ stoker explain train.py:loader --epoch 3 --steps 1200:1210
    $ stoker explain mypkg.data:make_loader --host 1/4 --state state.json
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._hosts import Shard
from ._state import AHEAD, BATCHES, EPOCH, SAMPLER
from .errors import ConfigError

__all__ = ["add_explain", "explain_steps", "load_loader"]


def add_explain(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``stoker explain`` on the command line's subcommands."""
    cmd = commands.add_parser(
        "explain",
        help="print which records each step of an epoch holds, without reading them",
        description=(
            "Load a stoker DataLoader from a Python file or module (FILE.py:NAME or "
            "package.module:NAME; NAME may be a loader or a function returning one) and "
            "print one JSON line per step: epoch, step, host and the dataset indices of "
            "that step's batch on that host (and, for sk.mix, each index's source)."
        ),
    )
    cmd.add_argument("target", help="FILE.py:NAME or package.module:NAME")
    cmd.add_argument("--epoch", type=int, default=None, help="the epoch (default 0)")
    cmd.add_argument("--steps", default=None, metavar="A:B", help="steps A to B-1 (default all)")
    cmd.add_argument(
        "--host", default=None, metavar="I/N", help="host I of N (default: the loader's)"
    )
    cmd.add_argument(
        "--state",
        type=Path,
        default=None,
        help="a saved state (JSON): the steps a run resumed from it sees",
    )
    cmd.set_defaults(handler=_run, parser=cmd)


def _run(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.parser
    try:
        loader = load_loader(args.target)
        host = _host(args.host) if args.host else None
        state = json.loads(args.state.read_text(encoding="utf-8")) if args.state else None
        start, stop = _steps(args.steps)
        for line in explain_steps(
            loader, epoch=args.epoch, start=start, stop=stop, host=host, state=state
        ):
            print(json.dumps(line), flush=True)
    except (ConfigError, OSError, ValueError, ImportError, AttributeError) as exc:
        parser.error(str(exc))
    return 0


def _host(text: str) -> Shard:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ConfigError(f"--host must be I/N (host I of N), got {text!r}") from None
    return Shard(index, count)


def _steps(text: str | None) -> tuple[int, int | None]:
    if text is None:
        return 0, None
    first, sep, last = text.partition(":")
    if not sep:
        raise ConfigError(f"--steps must be A:B, got {text!r}")
    return int(first or 0), (int(last) if last else None)


def load_loader(target: str) -> Any:
    """The loader ``FILE.py:NAME`` or ``module:NAME`` names (a function is called).

    Errors:
        ConfigError: a target without ``:NAME``; ImportError, AttributeError as raised.
    """
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise ConfigError(f"name the loader as FILE.py:NAME or module:NAME, got {target!r}")
    if where.endswith(".py") or Path(where).exists():
        path = Path(where).resolve()
        spec = importlib.util.spec_from_file_location(f"_stoker_explain_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    obj = getattr(module, name)
    if not hasattr(obj, "batch_indices") and callable(obj):
        obj = obj()
    if not hasattr(obj, "batch_indices"):
        raise ConfigError(f"{target} is a {type(obj).__name__}, not a stoker DataLoader")
    return obj


def explain_steps(
    loader: Any,
    *,
    epoch: int | None = None,
    start: int = 0,
    stop: int | None = None,
    host: Shard | None = None,
    state: dict[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """One dict per step: ``epoch``, ``step``, ``host`` ([index, count]) and ``indices``
    (and ``sources``, ``[name, index]`` pairs, for a mixture).

    With ``state``, the steps after it (its epoch; the batches it handed out passed
    over, a token sampler's segments re-dealt for this host count).
    """
    hosts = host if host is not None else loader.shard
    if state is not None:
        if epoch is not None and epoch != state[EPOCH]:
            raise ConfigError(f"--epoch {epoch} differs from the state's epoch {state[EPOCH]}")
        epoch = int(state[EPOCH])
        steps = _resumed(loader, state, hosts, epoch)
    else:
        epoch = 0 if epoch is None else epoch
        steps = _all_steps(loader, epoch, hosts)
    for step, indices in steps:
        if step < start:
            continue
        if stop is not None and step >= stop:
            return
        line: dict[str, Any] = {
            "epoch": epoch,
            "step": step,
            "host": [hosts.index, hosts.count],
            "indices": indices,
        }
        sources = loader.batch_sources(indices)
        if sources is not None:
            line["sources"] = sources
        yield line


def _all_steps(loader: Any, epoch: int, hosts: Shard) -> Iterator[tuple[int, list[int]]]:
    step = 0
    while True:
        try:
            indices = loader.batch_indices(epoch, step, host=hosts)
        except IndexError:
            return
        yield step, indices
        step += 1


def _resumed(
    loader: Any, state: dict[str, Any], hosts: Shard, epoch: int
) -> Iterator[tuple[int, list[int]]]:
    dealer: Any = getattr(getattr(loader, "_config", None), "batch_sampler", None)
    if dealer is not None and callable(getattr(dealer, "host_cursor", None)):
        cursor = dealer.host_cursor(epoch, hosts, state.get(SAMPLER), loader.seed)
        step = cursor.batches
        while (batch := cursor.next_batch()) is not None:
            yield step, [int(i) for i in batch]
            step += 1
        return
    ahead = set(state.get(AHEAD, []))
    for step, indices in _all_steps(loader, epoch, hosts):
        if step >= int(state[BATCHES]) and step not in ahead:
            yield step, indices
