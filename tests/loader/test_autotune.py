"""worker_mode="auto", num_workers="auto", prefetch="auto": the loader sizes itself.

Decisions are asserted, never speed. Batches and states are compared with fixed
settings: which executor builds a batch never changes it.
"""

import gc
import logging
import os
import re
import signal
import threading
import time

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_batches


def _slow(seconds):
    @sk.releases_gil
    def wait(x):
        time.sleep(seconds)
        return x

    return wait


def _record(x, rng):
    return {"x": np.full(3, x, dtype=np.int64), "r": rng.random(2)}


def _drain(it, into):
    for b in it:
        into.extend(b.tolist())


def _in_flight(where):
    return int(re.match(r"\d+ thread workers, (\d+) batches in flight", where).group(1))


def test_tiny_records_with_workers_are_built_inline(caplog):
    loader = sk.DataLoader(sk.range(0, 40_000), batch_size=64, num_workers=2)
    with caplog.at_level(logging.INFO, logger="stoker"), loader:
        it = iter(loader)
        assert sum(len(b) for b in it) == 40_000
        where = it.stats().prefetch
    assert "auto: inline" in where
    assert "hand-off costs more than the work" in where
    assert any("built inline" in r.getMessage() for r in caplog.records)
    stats = it.stats()
    # The report says what auto did, and does not ask for what is already done.
    assert 0 < stats.inline_since < 40_000 // 64
    assert f"none since batch {stats.inline_since}" in str(stats)
    assert "worker_mode='auto' builds the batches on the loop's thread" in stats.verdict.reason
    assert "use fewer workers" not in str(stats)


@sk.releases_gil  # marked, yet pure Python: two threads take turns with the GIL
def _gil_bound(x):
    total = 0
    for i in range(200):
        total += i
    return x + total


def test_gil_bound_threads_give_the_batches_of_a_fixed_setting(no_leaks):
    # Whether auto tries inline, and keeps it, depends on this machine's clocks; the
    # batches, and every state along the way, never do.
    kw = {"batch_size": 32, "shuffle": True, "seed": 5}
    ds = sk.range(0, 12_000).map(_gil_bound)
    with (
        sk.DataLoader(ds, num_workers=2, **kw) as auto,
        sk.DataLoader(ds, num_workers=0, **kw) as fixed,
    ):
        assert_same_batches(auto, fixed, epochs=2)


@pytest.mark.parametrize("ordered", [True, False])
def test_a_try_of_inline_resumes_exactly(ordered, no_leaks):
    ds = sk.range(0, 3000).map(_gil_bound)
    kw = {"batch_size": 16, "shuffle": True, "seed": 2, "ordered": ordered}
    with sk.DataLoader(ds, num_workers=2, **kw) as loader:
        assert_resumes_exactly(loader, epochs=2, max_stops=6)


def test_input_bound_keeps_the_workers_and_more_batches_in_flight():
    # Each batch waits 4 ms on (simulated) I/O; the consumer takes nothing.
    ds = sk.range(0, 4 * 80).map(_slow(0.001))
    with sk.DataLoader(ds, batch_size=4, num_workers=2) as loader:
        it = iter(loader)
        for _ in it:
            pass
        where = it.stats().prefetch
    assert "auto: thread workers" in where
    assert _in_flight(where) > 4  # more than it started with (2 per worker)


def test_compute_bound_keeps_the_workers_with_fewer_batches_in_flight():
    ds = sk.range(0, 4 * 80).map(_slow(0.0025))  # 10 ms a batch, 2 workers
    with sk.DataLoader(ds, batch_size=4, num_workers=2, prefetch="auto") as loader:
        it = iter(loader)
        for _ in it:
            time.sleep(0.012)  # the training step is the bottleneck
        where = it.stats().prefetch
    assert "auto: thread workers" in where
    assert _in_flight(where) < 4  # fewer than it started with (2 per worker)


def test_a_fixed_prefetch_is_not_tuned():
    ds = sk.range(0, 4 * 80).map(_slow(0.0025))
    with sk.DataLoader(ds, batch_size=4, num_workers=2, prefetch=6) as loader:
        it = iter(loader)
        for _ in it:
            time.sleep(0.012)
        assert "6 batches in flight" in it.stats().prefetch


def test_auto_settings_are_accepted_and_checked():
    loader = sk.DataLoader(sk.range(0, 8), batch_size=2, num_workers="auto", prefetch="auto")
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    loader.close()
    inline = sk.DataLoader(sk.range(0, 4), batch_size=2, num_workers="auto", worker_mode="inline")
    assert [b.tolist() for b in inline] == [[0, 1], [2, 3]]
    with pytest.raises(sk.ConfigError, match="'auto'"):
        sk.DataLoader(sk.range(0, 4), num_workers="many")
    with pytest.raises(sk.ConfigError, match="'auto'"):
        sk.DataLoader(sk.range(0, 4), prefetch="lots")


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: sk.range(0, 3000), id="tiny-goes-inline"),
        pytest.param(
            lambda: sk.range(0, 600).map(sk.shares_process(_record), seeded=True),
            id="process-handover",
        ),
        pytest.param(lambda: sk.range(0, 600).map(_record, seeded=True), id="isolated"),
        pytest.param(lambda: sk.range(0, 600).map(_slow(0.0005)), id="threads"),
    ],
)
def test_auto_gives_the_batches_of_a_fixed_setting(make, no_leaks):
    kw = {"batch_size": 16, "shuffle": True, "seed": 3, "last_batch": "rollover"}
    with (
        sk.DataLoader(make(), num_workers="auto", prefetch="auto", **kw) as auto,
        sk.DataLoader(make(), num_workers=0, **kw) as fixed,
    ):
        assert_same_batches(auto, fixed, epochs=3)


# Unmarked user code runs in the worker processes only; marked code may start on
# threads while they start (the handover).
MARKS = [pytest.param(lambda fn: fn, id="isolated"), pytest.param(sk.shares_process, id="marked")]


@pytest.mark.parametrize("mark", MARKS)
def test_auto_resumes_exactly(mark, no_leaks):
    ds = sk.range(0, 120).map(mark(_record), seeded=True)
    with sk.DataLoader(ds, batch_size=8, shuffle=True, seed=1, num_workers=2) as loader:
        assert_resumes_exactly(loader, epochs=2, max_stops=6)


def _raises_at(bad):
    def fn(x):
        if x == bad:
            raise ValueError(f"bad record {x}")
        return x

    return fn


@pytest.mark.parametrize("mark", MARKS)
@pytest.mark.parametrize("bad", [2, 150])  # in the first (split) batch; later on
def test_an_exception_in_a_worker_names_its_sample_and_the_next_batch_follows(bad, mark, no_leaks):
    ds = sk.range(0, 400).map(mark(_raises_at(bad)))
    with sk.DataLoader(ds, batch_size=8, num_workers=2) as loader:
        it = iter(loader)
        good = []
        with pytest.raises(ValueError, match=f"bad record {bad}") as info:
            _drain(it, good)
        assert any(f"sample index {bad} " in note for note in info.value.__notes__)
        good.extend(x for b in it for x in b.tolist())
    lost = range(bad // 8 * 8, bad // 8 * 8 + 8)
    assert good == [x for x in range(400) if x not in lost]


def _dies_once_in_a_process(parent, pid_file):
    def fn(x):
        if os.getpid() != parent and not os.path.exists(pid_file):
            try:  # one worker process only: the first to claim it
                os.close(os.open(pid_file + ".claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                tmp = f"{pid_file}.{os.getpid()}.tmp"
                with open(tmp, "w") as f:
                    f.write(str(os.getpid()))
                os.replace(tmp, pid_file)
                time.sleep(30)
        time.sleep(0.001)
        return x

    return fn


def test_a_worker_process_killed_after_the_handover_is_named_and_state_resumes(tmp_path, no_leaks):
    pid_file = str(tmp_path / "pid")
    # Marked: the first batches are built on threads, then by the worker processes.
    ds = sk.range(0, 3000).map(sk.shares_process(_dies_once_in_a_process(os.getpid(), pid_file)))

    def kill():
        deadline = time.monotonic() + 60
        while not os.path.exists(pid_file) and time.monotonic() < deadline:
            time.sleep(0.01)
        if os.path.exists(pid_file):
            with open(pid_file) as f:
                os.kill(int(f.read()), signal.SIGKILL)

    killer = threading.Thread(target=kill, name="test-killer", daemon=True)
    killer.start()
    with sk.DataLoader(ds, batch_size=4, num_workers=2) as loader:
        it = iter(loader)
        good = []
        with pytest.raises(sk.WorkerCrashed, match="SIGKILL"):
            _drain(it, good)
        killer.join(60)
        rest = [x for b in loader.iter(state=it.state_dict()) for x in b.tolist()]
    assert good + rest == list(range(3000))


@pytest.mark.parametrize("mark", MARKS)
@pytest.mark.parametrize("after", [0, 3, 200])  # before, around and after the handover
def test_leaving_early_ends_every_worker(after, mark, no_leaks):
    ds = sk.range(0, 2000).map(_slow(0.0005))
    ds = ds.map(mark(lambda x: x))  # not releasing the GIL: process workers
    with sk.DataLoader(ds, batch_size=4, num_workers=2) as loader:
        for k, _ in enumerate(loader):
            if k == after:
                break


def test_a_half_used_iterator_is_collected_and_ends_its_work(no_leaks):
    ds = sk.range(0, 2000).map(lambda x: x)
    loader = sk.DataLoader(ds, batch_size=4, num_workers=2)
    it = iter(loader)
    next(it)
    next(it)
    del it
    gc.collect()
    # The loader's workers survive the iterator (they serve the next epoch).
    assert [b.tolist() for b in loader.iter(epoch=0)][:2] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    loader.close()


def test_an_exception_after_the_switch_to_inline_loses_only_its_batch(no_leaks):
    ds = sk.range(0, 20_000).map(sk.releases_gil(_raises_at(5_000)))
    with sk.DataLoader(ds, batch_size=64, num_workers=2) as loader:
        it = iter(loader)
        good = []
        with pytest.raises(ValueError, match="bad record 5000"):
            _drain(it, good)
        _drain(it, good)
        assert "auto: inline" in it.stats().prefetch
    lost = range(5_000 // 64 * 64, 5_000 // 64 * 64 + 64)
    assert good == [x for x in range(20_000) if x not in lost]
