"""The order ledger: batch_indices equals what the loader delivers; stoker explain."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_same_order

N = 37


def _delivered(loader: Any, epochs: int = 3) -> list[list[list[int]]]:
    """Per epoch, the indices of each batch as delivered (the dataset returns its index)."""
    out = []
    for _ in range(epochs):
        out.append([np.atleast_1d(np.asarray(b)).astype(int).tolist() for b in loader])
    return out


def _check(loader: Any, epochs: int = 3) -> None:
    for epoch, batches in enumerate(_delivered(loader, epochs)):
        for step, batch in enumerate(batches):
            assert loader.batch_indices(epoch, step) == batch, (epoch, step)
        with pytest.raises(IndexError, match=f"epoch {epoch} has no batch {len(batches)}"):
            loader.batch_indices(epoch, len(batches))


class _Evens:
    """A foreign sampler (any iterable of indices)."""

    def __iter__(self) -> Any:
        return iter(range(0, N, 2))

    def __len__(self) -> int:
        return (N + 1) // 2


PLANS: dict[str, dict[str, Any]] = {
    "sequential": {"batch_size": 4},
    "shuffle": {"batch_size": 4, "shuffle": True, "seed": 9},
    "drop": {"batch_size": 5, "shuffle": True, "last_batch": "drop"},
    "rollover": {"batch_size": 5, "shuffle": True, "last_batch": "rollover"},
    "no-batching": {"batch_size": None, "shuffle": True},
    "foreign-sampler": {"batch_size": 3, "sampler": _Evens()},
    "weighted-sampler": {"batch_size": 3, "sampler": sk.WeightedSampler(np.ones(N), seed=2)},
    "batch-sampler": {"batch_sampler": [[3, 1], [0], [5, 6, 7]]},
    "token-sampler": {"batch_sampler": sk.TokenBatchSampler(np.arange(N) % 9 + 1, 20)},
}


@pytest.mark.parametrize("plan", list(PLANS))
@pytest.mark.parametrize("workers", [0, 2])
def test_batch_indices_equal_the_delivered_batches(plan: str, workers: int) -> None:
    kwargs = dict(PLANS[plan])
    mode = "thread" if workers else "inline"
    loader = sk.DataLoader(sk.range(0, N), num_workers=workers, worker_mode=mode, **kwargs)
    with loader:
        _check(loader)


@pytest.mark.parametrize("plan", ["shuffle", "rollover", "drop", "token-sampler", "batch-sampler"])
@pytest.mark.parametrize("hosts", [2, 3])
def test_batch_indices_on_every_host(plan: str, hosts: int) -> None:
    for host in range(hosts):
        kwargs = dict(PLANS[plan])
        loader = sk.DataLoader(sk.range(0, N), shard=sk.Shard(host, hosts), **kwargs)
        _check(loader)


def test_batch_indices_of_a_mixture_name_each_source() -> None:
    mixed = sk.mix({"a": sk.range(0, 20), "b": sk.range(100, 110)}, weights=[0.6, 0.4])
    loader = sk.DataLoader(mixed, batch_size=4, shuffle=True, seed=5, collate_fn=list)
    for epoch, batches in enumerate(_delivered(loader, 2)):
        for step, batch in enumerate(batches):
            indices = loader.batch_indices(epoch, step)
            sources = loader.batch_sources(indices)
            assert sources is not None
            values = [i if name == "a" else 100 + i for name, i in sources]
            assert values == batch


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (
            lambda: sk.DataLoader(sk.range(0, N).filter(lambda x: x % 3 != 0), batch_size=4),
            "filter",
        ),
        (lambda: sk.DataLoader(sk.range(0, N), batch_size=4, on_error="skip"), "skip"),
        (
            lambda: sk.DataLoader(
                sk.pack(sk.from_sequence([{"tokens": np.arange(n % 5 + 1)} for n in range(N)]), 8),
                batch_size=2,
            ),
            "pack",
        ),
        (lambda: sk.DataLoader(sk.from_iterable(lambda: iter(range(N))), batch_size=4), "stream"),
    ],
)
def test_batches_that_depend_on_contents_are_not_supported(make: Any, why: str) -> None:
    with pytest.raises(sk.NotSupportedError, match=why):
        make().batch_indices(0, 0)


def test_a_late_step_of_a_large_epoch_is_a_slice() -> None:
    loader = sk.DataLoader(sk.range(0, 1_000_000), batch_size=32, shuffle=True)
    first = loader.batch_indices(0, 31_000)
    assert loader.batch_indices(0, 31_000) == first
    assert len(first) == 32


def test_assert_same_order_hosts_and_resumes() -> None:
    ds = sk.range(0, 48)
    two = [sk.DataLoader(ds, batch_size=6, shuffle=True, shard=sk.Shard(i, 2)) for i in range(2)]
    three = [sk.DataLoader(ds, batch_size=4, shuffle=True, shard=sk.Shard(i, 3)) for i in range(3)]
    assert_same_order(two, three, epochs=2)
    assert_same_order(sk.DataLoader(ds, batch_size=12, shuffle=True), two, epochs=2)
    with pytest.raises(AssertionError, match="epoch 0 step 0"):
        assert_same_order(
            sk.DataLoader(ds, batch_size=12, shuffle=True, seed=1),
            sk.DataLoader(ds, batch_size=12, shuffle=True, seed=2),
        )


SCRIPT = """
import numpy as np
import stoker as sk

lengths = np.arange(40) % 11 + 1
loader = sk.DataLoader(
    sk.range(0, 40), batch_sampler=sk.TokenBatchSampler(lengths, 30), collate_fn=list, seed=1
)
mixed = sk.DataLoader(sk.mix({"a": sk.range(0, 8), "b": sk.range(0, 8)}), batch_size=4)

def make():
    return sk.DataLoader(sk.range(0, 40), batch_size=8, shuffle=True, shard=sk.Shard(0, 2))
"""


def _explain(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = subprocess.run(
        [sys.executable, "-m", "stoker._cli", "explain", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_explain_prints_the_steps(tmp_path: Path) -> None:
    from stoker._explain import load_loader

    lines = _explain(tmp_path, "train.py:loader", "--epoch", "1", "--steps", "1:4")
    assert [line["step"] for line in lines] == [1, 2, 3]
    loader = load_loader(f"{tmp_path / 'train.py'}:loader")
    for line in lines:
        assert line["epoch"] == 1
        assert line["host"] == [0, 1]
        assert line["indices"] == loader.batch_indices(1, line["step"])
    mixed = _explain(tmp_path, "train.py:mixed", "--steps", "0:1")
    assert [name for name, _ in mixed[0]["sources"]]
    assert len(mixed[0]["indices"]) == 4
    hosts = _explain(tmp_path, "train.py:make", "--host", "1/2")
    made = load_loader(f"{tmp_path / 'train.py'}:make")
    assert [line["indices"] for line in hosts] == [
        made.batch_indices(0, s, host=sk.Shard(1, 2)) for s in range(len(hosts))
    ]


def test_explain_from_a_state(tmp_path: Path) -> None:
    from stoker._explain import load_loader

    _explain(tmp_path, "train.py:loader", "--steps", "0:1")
    loader = load_loader(f"{tmp_path / 'train.py'}:loader")
    it = iter(loader)
    for _ in range(3):
        next(it)
    (tmp_path / "state.json").write_text(json.dumps(it.state_dict()))
    rest = [list(b) for b in it]
    lines = _explain(tmp_path, "train.py:loader", "--state", "state.json")
    assert [line["step"] for line in lines] == list(range(3, 3 + len(rest)))
    assert [sorted(line["indices"]) for line in lines] == [sorted(b) for b in rest]


def test_explain_names_a_bad_target(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("x = 3\n")
    out = subprocess.run(
        [sys.executable, "-m", "stoker._cli", "explain", "train.py:x"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 2
    assert "not a stoker DataLoader" in out.stderr
