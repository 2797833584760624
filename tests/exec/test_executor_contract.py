"""The contract every executor keeps (``stoker._exec.executor.Executor``).

Each test runs once per entry of ``EXECUTORS`` (in ``cells.py``, shared with the plan
axis of ``test_contract_plans.py``); a new executor is added by adding its entry (its
``worker_mode`` and how many workers to give it). The executors are
used the two ways the loader uses them: straight (``submit`` / ``cancel`` /
``close``), and behind a ``DataLoader`` with that ``worker_mode``.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future
from concurrent.futures import wait as futures_wait
from typing import Any

import numpy as np
import pytest
import ray_local
from cells import EXECUTORS, Entry
from gates import held_back

import stoker as sk
from stoker._context import Context
from stoker._exec.executor import Executor
from stoker._exec.jobs import Job
from stoker._exec.make import make_executor, worker_spec
from stoker.testing import assert_batches_equal, run_epochs


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray instance for this module's Ray entries, started on first use."""
    pytest.importorskip("ray")
    yield from ray_local.local_ray()


@pytest.fixture(params=EXECUTORS, ids=str)
def entry(request: pytest.FixtureRequest) -> Entry:
    if request.param.mode == "ray":
        request.getfixturevalue("local_ray")
    return request.param


def _noisy(record: Any, rng: np.random.Generator) -> Any:
    return record * 1000 + int(rng.integers(0, 1000))


def _fail_at_13(record: Any) -> Any:
    if record == 13:
        raise ValueError(f"bad record {record}")
    return record


def pipeline() -> sk.Dataset[Any]:
    return sk.range(0, 50).map(_noisy, seeded=True)


def loader_for(entry: Entry, ds: Any = None, **extra: Any) -> sk.DataLoader[Any]:
    return sk.DataLoader(
        pipeline() if ds is None else ds,
        batch_size=4,
        shuffle=True,
        seed=7,
        num_workers=entry.num_workers,
        worker_mode=entry.mode,
        **extra,
    )


def executor_for(entry: Entry, ds: Any, **extra: Any) -> Executor:
    """The executor a loader of ``entry`` would start, made the way the loader makes it."""
    loader = loader_for(entry, ds, **extra)
    cfg = loader._config
    return make_executor(loader._mode, worker_spec(cfg, ds), cfg, loader._settings)


def job(seq: int, indices: list[int], token: int = 1) -> Job:
    parts = ((Context(0, 0), np.array(indices, dtype=np.int64)),)
    return Job(seq, "build", parts, f"batch {seq} of epoch 0", None, len(indices), token)


def inline_reference(epochs: int = 2) -> list[Any]:
    return run_epochs(loader_for(Entry("inline", 0)), epochs)


# -- the same batches, exact resume --------------------------------------------------------------


def test_the_same_batches_as_inline(entry: Entry) -> None:
    with loader_for(entry) as loader:
        got = run_epochs(loader, 2)
    expected = inline_reference()
    assert len(got) == len(expected)
    for a, b in zip(expected, got, strict=True):
        assert_batches_equal(a, b)


@pytest.mark.parametrize("ordered", [True, False])
def test_a_state_resumes_exactly_in_every_executor(
    entry: Entry, ordered: bool, request: pytest.FixtureRequest
) -> None:
    expected = inline_reference(1)
    with loader_for(entry, ordered=ordered) as loader:
        it = iter(loader)
        head = [next(it) for _ in range(5)]
        saved = json.dumps(it.state_dict())
        it.close()
    for other in EXECUTORS:  # a state saved under one executor resumes under each
        if other.mode == "ray":
            request.getfixturevalue("local_ray")
        with loader_for(other) as resumed:
            rest = list(resumed.iter(state=json.loads(saved)))
        got = head + rest
        key = sorted if not ordered else list
        assert key(b.tolist() for b in got) == key(b.tolist() for b in expected), other


def test_the_window_depth_may_change_between_batches(entry: Entry) -> None:
    expected = inline_reference(1)
    with loader_for(entry, prefetch=0 if entry.num_workers == 0 else None) as loader:
        it = iter(loader)
        window = it._window  # what a tuner of the depth holds
        assert window is not None
        got, states = [], []
        for depth in itertools.cycle([1, 5, 2, 8, 1, 3]):
            window.depth = depth
            try:
                got.append(next(it))
            except StopIteration:
                break
            states.append(it.state_dict())
    assert [b.tolist() for b in got] == [b.tolist() for b in expected]
    with loader_for(Entry("inline", 0)) as plain:
        it = iter(plain)
        for batch, state in zip(expected, states, strict=True):
            assert next(it).tolist() == batch.tolist()
            assert it.state_dict() == state


# -- cancellation, errors, close -----------------------------------------------------------------


def test_cancel_leaves_no_job_of_the_token_pending(entry: Entry) -> None:
    with executor_for(entry, sk.range(0, 100)) as ex:
        mine = [
            ex.submit(
                job(s, [s]),
            )
            for s in range(12)
        ]
        other = ex.submit(job(12, [12], token=2))
        ex.cancel(1)
        done, pending = futures_wait(mine, timeout=10)
        assert not pending  # each finished or was cancelled: nothing waits for ever
        for future in done:
            if not future.cancelled():
                assert future.result().value.tolist() in ([s] for s in range(12))
        assert other.result(10).value.tolist() == [12]  # another token's job still runs


def test_an_error_carries_its_sample_and_batch_index(entry: Entry) -> None:
    with executor_for(entry, sk.range(0, 20).map(_fail_at_13)) as ex:
        future = ex.submit(job(3, [12, 13, 14]))
        with pytest.raises(ValueError, match="bad record 13") as info:
            future.result(10)
    assert info.value.sample_index == 13  # type: ignore[attr-defined]
    assert info.value.batch_index == 3  # type: ignore[attr-defined]
    assert any("sample index 13" in note for note in info.value.__notes__)


def test_an_error_through_the_loader_loses_only_its_batch(entry: Entry) -> None:
    ds = sk.range(0, 20).map(_fail_at_13)
    with sk.DataLoader(
        ds, batch_size=4, num_workers=entry.num_workers, worker_mode=entry.mode
    ) as loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(3)]
        with pytest.raises(ValueError, match="bad record 13") as info:
            next(it)
        got += [b.tolist() for b in it]
    assert info.value.sample_index == 13  # type: ignore[attr-defined]
    assert any("batch 3 of epoch 0" in note for note in info.value.__notes__)
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [16, 17, 18, 19]]


def test_close_wakes_every_wait(entry: Entry, tmp_path: Any) -> None:
    gate = tmp_path / "gate"
    gate.write_text("")
    ds = sk.range(0, 100).map(held_back(set(range(100)), str(gate)))
    ex = executor_for(entry, ds)
    futures = [ex.submit(job(s, [s])) for s in range(8)]
    woke: list[str] = []

    def wait_on(future: Future[Any]) -> None:
        futures_wait([future])  # no timeout: only close() can end it
        woke.append("ok")

    # Inline jobs run on the thread that asks, so only waiters that do not ask are
    # meaningful there; thread and process jobs are held back by the gate.
    waiters = [threading.Thread(target=wait_on, args=(f,), daemon=True) for f in futures]
    for t in waiters:
        t.start()
    time.sleep(0.2)
    gate.unlink()  # running jobs may finish; the rest must be woken by close()
    ex.close()
    ex.close()  # idempotent
    for t in waiters:
        t.join(10)
    assert len(woke) == len(futures)
    for future in futures:
        assert future.done()
        if not future.cancelled() and future.exception() is None:
            assert future.result().value.shape == (1,)
    later = ex.submit(job(9, [9]))
    with pytest.raises((CancelledError, sk.StokerError)):
        later.result(10)


def test_nothing_leaks(entry: Entry, no_leaks: Any) -> None:
    with loader_for(entry) as loader:
        it = iter(loader)
        next(it)
        it.close()  # left early
        del it
        run_epochs(loader, 1)
    with executor_for(entry, sk.range(0, 10)) as ex:
        ex.submit(job(0, [1, 2])).result(10)
