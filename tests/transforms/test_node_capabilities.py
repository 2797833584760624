"""Every dataset node answers ``may_skip`` and ``releases_gil`` itself, and
``worker_mode="auto"`` follows the answer (threads when the pipeline releases the GIL).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import stoker as sk


@sk.releases_gil
def _plus_one(x):
    return x + 1


def _plain(x):
    return x + 1


@sk.releases_gil
def _numbers():
    return iter(range(40))


def _stream_records():
    return iter(range(40))


MAP_STYLE = {
    "range": (sk.range(8), True, False),
    "arrays": (sk.from_arrays(np.arange(8)), True, False),
    "sequence": (sk.from_sequence(list(range(8))), True, False),
    "shuffle": (sk.range(8).shuffle(0), True, False),
    "shard": (sk.range(8).shard(0, 2), True, False),
    "concat": (sk.concat([sk.range(4), sk.range(4)]), True, False),
    "zip": (sk.zip(sk.range(4), sk.range(4)), True, False),
    "mix": (sk.mix([sk.range(4), sk.range(4)]), True, False),
    "marked map": (sk.range(8).map(_plus_one), True, False),
    "plain map": (sk.range(8).map(_plain), False, False),
    "marked filter": (sk.range(8).filter(sk.releases_gil(bool)), True, True),
    "plain filter": (sk.range(8).filter(bool), False, True),
    "filter under shuffle": (sk.range(8).filter(bool).shuffle(0), False, True),
    "filter in a mix": (sk.mix([sk.range(4).filter(bool), sk.range(4)]), False, True),
    "plain map in a zip": (sk.zip(sk.range(4), sk.range(4).map(_plain)), False, False),
    "pack": (sk.range(8).map(lambda i: {"tokens": [i]}).pack(4), False, True),
}


@pytest.mark.parametrize("name", sorted(MAP_STYLE))
def test_map_style_nodes_answer_for_themselves_and_their_parents(name):
    ds, releases, skips = MAP_STYLE[name]
    assert ds.releases_gil is releases
    assert ds.may_skip is skips


STREAMS = {
    "marked factory": (sk.from_iterable(_numbers), True, False),
    "plain factory": (sk.from_iterable(_stream_records), False, False),
    "marked map": (sk.from_iterable(_numbers).map(_plus_one), True, False),
    "plain map": (sk.from_iterable(_numbers).map(_plain), False, False),
    "filter": (sk.from_iterable(_numbers).filter(sk.releases_gil(bool)), True, True),
    "shuffle": (sk.from_iterable(_numbers).shuffle(window=4, seed=0), True, False),
    "batch": (sk.from_iterable(_numbers).batch(4), True, False),
    "batch with a plain collate": (
        sk.from_iterable(_numbers).batch(4, collate_fn=list),
        False,
        False,
    ),
    "mix": (sk.mix([sk.from_iterable(_numbers), sk.from_iterable(_numbers)]), True, False),
    "mix with a plain part": (
        sk.mix([sk.from_iterable(_numbers), sk.from_iterable(_stream_records)]),
        False,
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_stream_nodes_answer_for_themselves_and_their_parents(name):
    ds, releases, skips = STREAMS[name]
    assert ds.releases_gil is releases
    assert ds.may_skip is skips


def test_a_dataset_of_your_own_runs_on_processes_unless_it_says_it_releases_the_gil():
    class Plain(sk.Dataset):
        def __len__(self):
            return 12

        def __getitem__(self, i):
            return os.getpid()

    class Free(Plain):
        @property
        def releases_gil(self):
            return True

    assert not Plain().releases_gil
    with sk.DataLoader(Free(), batch_size=4, num_workers=2) as loader:
        it = iter(loader)
        pids = {int(p) for b in it for p in b}
        assert it.stats().worker_mode == "thread"
    assert pids == {os.getpid()}
    with sk.DataLoader(Plain(), batch_size=4, num_workers=2) as loader:
        it = iter(loader)
        list(it)
        assert it.stats().worker_mode == "process"


def test_auto_runs_a_mixed_stream_of_marked_sources_on_threads():
    ds = sk.mix([sk.from_iterable(_numbers), sk.from_iterable(_numbers)], weights=[1, 1])
    with sk.DataLoader(ds, batch_size=4, num_workers=2) as loader:
        it = iter(loader)
        batches = [b.tolist() for b in it]
        assert it.stats().worker_mode == "thread"
    loader = sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode="process")
    with loader:
        assert batches == [b.tolist() for b in loader]  # the same as on processes


def test_a_custom_collate_decides_too():
    ds = sk.range(8)

    def plain_collate(records):
        return np.asarray(records)

    with sk.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=plain_collate) as loader:
        it = iter(loader)
        list(it)
        assert it.stats().worker_mode == "process"
    marked = sk.releases_gil(plain_collate)
    with sk.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=marked) as loader:
        it = iter(loader)
        list(it)
        assert it.stats().worker_mode == "thread"
