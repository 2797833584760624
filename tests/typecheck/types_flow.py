"""Types flow from dataset to batch: checked by ``mypy --strict tests/typecheck`` in CI.

Each ``assert_type`` is a claim mypy verifies; each ``# type: ignore[...]`` marks a
line mypy must reject (strict mode fails on an ignore that is not needed). The
functions are never called: this file is read by the type checker, not run.
"""

from __future__ import annotations

from typing import Any, NamedTuple, assert_type

import numpy as np

import stoker as sk


class Pair(NamedTuple):
    x: np.ndarray
    y: list[str]


def collate_pairs(records: list[tuple[np.ndarray, str]]) -> Pair:
    return Pair(np.stack([r[0] for r in records]), [r[1] for r in records])


def datasets_keep_their_record_type() -> None:
    ints: sk.Dataset[int] = sk.range(0, 10)
    assert_type(ints.map(str), sk.Dataset[str])
    assert_type(ints.map(lambda i: float(i)), sk.Dataset[float])
    assert_type(ints.map(lambda i, rng: i + int(rng.integers(3)), seeded=True), sk.Dataset[int])
    assert_type(ints.filter(lambda i: i % 2 == 0), sk.Dataset[int])
    assert_type(ints.shuffle(0).shard(0, 2), sk.Dataset[int])
    assert_type(ints[3], int)
    both: sk.Dataset[int] = sk.concat([ints, ints.map(lambda i: -i)])
    mixed: sk.Dataset[int] = sk.mix([ints, ints], weights=[0.5, 0.5])
    words: sk.Dataset[str] = ints.map(str)
    wrong: sk.Dataset[int] = ints.map(str)  # type: ignore[arg-type]
    del both, mixed, words, wrong


def streams_keep_their_record_type() -> None:
    stream: sk.IterDataset[int] = sk.from_iterable(lambda: iter(range(5)))
    assert_type(stream.map(lambda i: [i]), sk.IterDataset[list[int]])
    assert_type(stream.filter(bool), sk.IterDataset[int])


def a_loader_yields_what_its_collate_returns() -> None:
    records = sk.range(0, 8).map(lambda i: (np.full(3, i), str(i)))
    loader = sk.DataLoader(records, batch_size=4, collate_fn=collate_pairs)
    assert_type(loader, sk.DataLoader[Pair])
    for batch in loader:
        assert_type(batch, Pair)
        assert_type(batch.y, list[str])
    it = loader.iter(epoch=0)
    assert_type(it, sk.LoaderIterator[Pair])
    assert_type(next(it), Pair)
    assert_type(it.state_dict(), dict[str, Any])
    assert_type(it.stats(), sk.LoaderStats)
    assert_type(it.stats().verdict, sk.Verdict)
    assert_type(it.stats().as_dict(), dict[str, Any])
    assert_type(len(it), int)
    bar = sk.progress(loader)
    assert_type(bar, sk.Progress[Pair])
    assert_type(next(bar), Pair)
    as_list = sk.DataLoader(sk.range(0, 8), batch_size=2, collate_fn=sorted)
    assert_type(as_list, sk.DataLoader[list[Any]])
    wrong: sk.DataLoader[int] = sk.DataLoader(
        records,
        batch_size=4,
        collate_fn=collate_pairs,  # type: ignore[arg-type]
    )
    del wrong


def without_a_collate_fn_a_batch_is_any() -> None:
    loader = sk.DataLoader(sk.range(0, 8), batch_size=2)
    assert_type(loader, sk.DataLoader[Any])
    batch = next(iter(loader))
    assert_type(batch, Any)
