"""``it.stats()``: the counters, the report and the verdict.

The verdict is checked twice: on made-up counters (each rule on its own) and on real
loaders built to be input-bound, compute-bound, or slowed down by their workers.
Sleeps make a pipeline slow; no test asserts a speed, only the verdict's category.
"""

import json
import os
import time

import pytest

import stoker as sk


def _stats(**counters):
    base = {
        "batches": 1000,
        "samples": 64_000,
        "wait_seconds": 0.0,
        "produce_seconds": 0.0,
        "fetch_seconds": 0.0,
        "collate_seconds": 0.0,
        "elapsed_seconds": 10.0,
        "worker_mode": "inline",
        "prefetch": "caller thread",
        "cpu_count": 8,
    }
    return sk.LoaderStats(**{**base, **counters})


def _text(stats):
    return (str(stats) + "\n" + stats.bottleneck).lower()


# -- the verdict on made-up counters ---------------------------------------------------


def test_no_batches_has_no_verdict():
    stats = _stats(batches=0, samples=0)
    assert stats.verdict.kind == "unknown"
    assert stats.bottleneck == "no batches yet"


def test_a_loop_that_rarely_waits_is_compute_bound():
    stats = _stats(wait_seconds=0.5, fetch_seconds=0.4, collate_seconds=0.1)
    assert stats.verdict.kind == "compute-bound"
    assert stats.verdict.stage == "training step"
    assert stats.bottleneck.startswith("compute-bound")


def test_compute_bound_with_idle_workers_says_fewer_workers():
    stats = _stats(
        wait_seconds=0.1,
        num_workers=8,
        worker_mode="process",
        worker_utilisation=0.05,
        fetch_seconds=4.0,
        work_seconds=4.0,
        cpu_seconds=4.0,
    )
    assert stats.verdict.kind == "compute-bound"
    assert "fewer workers" in stats.verdict.advice[0]


def test_tiny_records_with_process_workers_say_fewer_workers():
    # The case: 2 process workers deliver 7x slower than the work would run
    # inline; the workers spend 10 % of their time on jobs.
    stats = _stats(
        samples=1_900_000,
        batches=7_422,
        elapsed_seconds=1.0,
        wait_seconds=0.97,
        fetch_seconds=0.10,
        collate_seconds=0.04,
        transfer_seconds=0.35,
        work_seconds=0.2,
        cpu_seconds=0.18,
        num_workers=2,
        worker_mode="process",
        worker_utilisation=0.1,
        depth=4,
    )
    verdict = stats.verdict
    assert verdict.kind == "input-bound"
    assert verdict.stage == "hand-off"
    assert "num_workers=0" in verdict.advice[0]
    assert "bigger batches" in verdict.advice[0]
    assert "more workers" not in _text(stats)


def test_workers_that_made_loading_slower_never_ask_for_more():
    # Inline this pipeline takes 6 s of work; with 2 workers it took 12 s.
    stats = _stats(
        elapsed_seconds=12.0,
        wait_seconds=11.0,
        fetch_seconds=5.0,
        transform_seconds=4.0,
        collate_seconds=1.0,
        work_seconds=12.0,
        cpu_seconds=5.5,
        num_workers=2,
        worker_mode="process",
        worker_utilisation=0.5,
        depth=4,
    )
    assert stats.verdict.kind == "input-bound"
    assert "num_workers=0" in stats.verdict.advice[0]
    assert "more workers" not in _text(stats)


def test_busy_workers_with_free_cores_ask_for_more_workers():
    stats = _stats(
        wait_seconds=8.0,
        fetch_seconds=38.0,
        transform_seconds=30.0,
        collate_seconds=1.0,
        work_seconds=39.0,
        cpu_seconds=38.0,
        num_workers=4,
        worker_mode="process",
        worker_utilisation=0.97,
        depth=8,
        cpu_count=16,
    )
    verdict = stats.verdict
    assert (verdict.kind, verdict.stage) == ("input-bound", "transforms")
    assert "more workers" in verdict.advice[0]
    assert "cheaper decode" in verdict.advice[1]


def test_busy_sized_threads_are_not_told_a_worker_count():
    stats = _stats(
        wait_seconds=8.0,
        fetch_seconds=38.0,
        collate_seconds=1.0,
        work_seconds=39.0,
        cpu_seconds=2.0,
        num_workers=12,
        worker_mode="thread",
        worker_utilisation=0.97,
        depth=24,
        cpu_count=16,
        workers_sized=True,
    )
    verdict = stats.verdict
    assert verdict.kind == "input-bound"
    assert "num_workers='auto' sizes the threads" in verdict.advice[0]
    assert "now 12" in verdict.advice[0]
    assert "num_workers=24" not in _text(stats)
    assert stats.as_dict()["workers_sized"] is True


def test_a_loader_that_went_inline_is_not_told_to_use_fewer_workers():
    stats = _stats(
        wait_seconds=0.9,
        elapsed_seconds=1.0,
        fetch_seconds=0.05,
        collate_seconds=0.01,
        work_seconds=0.02,
        cpu_seconds=0.01,
        num_workers=2,
        worker_mode="thread",
        worker_utilisation=0.01,
        depth=4,
        inline_since=9,
    )
    verdict = stats.verdict
    assert verdict.kind == "input-bound"
    assert verdict.stage == "hand-off"
    assert "since batch 9" in verdict.reason
    assert "num_workers=0 skips the first 9 hand-offs" in verdict.advice[0]
    assert "none since batch 9" in _text(stats)
    assert stats.as_dict()["inline_since"] == 9


def test_busy_workers_on_every_core_ask_for_a_cheaper_decode_not_more_workers():
    stats = _stats(
        wait_seconds=8.0,
        fetch_seconds=38.0,
        transform_seconds=30.0,
        collate_seconds=1.0,
        work_seconds=39.0,
        cpu_seconds=38.0,
        num_workers=4,
        worker_mode="process",
        worker_utilisation=0.97,
        depth=8,
        cpu_count=4,
    )
    assert stats.verdict.stage == "transforms"
    assert "cheaper decode" in stats.verdict.advice[0]
    assert "more workers" not in _text(stats)


def test_thread_workers_held_by_the_gil_are_told_to_use_processes():
    stats = _stats(
        wait_seconds=9.5,
        fetch_seconds=9.0,
        transform_seconds=8.5,
        collate_seconds=0.2,
        work_seconds=12.0,
        cpu_seconds=9.0,
        num_workers=4,
        worker_mode="thread",
        worker_utilisation=0.3,
        depth=8,
    )
    assert stats.verdict.kind == "input-bound"
    assert "worker_mode='process'" in stats.verdict.advice[0]
    assert "more workers" not in _text(stats)


def _churning_threads(**counters):
    return _stats(
        **{
            "wait_seconds": 9.0,
            "fetch_seconds": 19.0,
            "transform_seconds": 18.0,
            "collate_seconds": 0.5,
            "work_seconds": 19.5,
            "cpu_seconds": 15.0,
            "system_seconds": 6.0,
            "page_faults": 5_000_000,
            "num_workers": 2,
            "worker_mode": "thread",
            "worker_utilisation": 0.98,
            "depth": 4,
            "cpu_count": 2,
            **counters,
        }
    )


def test_threads_that_take_back_freed_memory_are_told_about_the_allocator():
    stats = _churning_threads()
    assert stats.verdict.kind == "input-bound"
    assert "40% of their cpu time in the kernel" in stats.verdict.reason.lower()
    assert "5,000 page faults a batch" in stats.verdict.reason
    assert "tune_allocator=True" in stats.verdict.advice[0]
    assert "worker_mode='process'" in stats.verdict.advice[0]
    assert "(kernel 40%, 5,000 page faults a batch)" in str(stats)


@pytest.mark.parametrize(
    "counters",
    [
        {"allocator_tuned": True},  # asked for already
        {"worker_mode": "process"},  # worker processes keep large blocks
        {"system_seconds": 1.0},  # the kernel's share is small: faults cost little
        {"page_faults": 100_000},  # 100 a batch: a few fresh arrays, not churn
    ],
)
def test_the_allocator_is_named_only_for_threads_that_churn_untuned(counters):
    assert "tune_allocator" not in _text(_churning_threads(**counters))


def test_starved_workers_with_a_small_window_ask_for_a_bigger_prefetch():
    stats = _stats(
        wait_seconds=6.0,
        fetch_seconds=8.0,
        collate_seconds=1.0,
        work_seconds=9.0,
        cpu_seconds=1.0,  # waiting for I/O
        num_workers=4,
        worker_mode="thread",
        worker_utilisation=0.25,
        depth=2,
    )
    assert stats.verdict.kind == "input-bound"
    assert "prefetch=8" in stats.verdict.advice[0]


def test_slow_reads_inline_ask_for_thread_workers():
    stats = _stats(wait_seconds=9.0, fetch_seconds=9.0, collate_seconds=0.1)
    verdict = stats.verdict
    assert (verdict.kind, verdict.stage) == ("input-bound", "read")
    assert "num_workers=7" in verdict.advice[0]
    assert "threads" in verdict.advice[0]


def test_cheap_batches_inline_keep_no_workers():
    stats = _stats(wait_seconds=9.0, fetch_seconds=0.02, collate_seconds=0.01)
    assert stats.verdict.kind == "input-bound"
    assert "keep num_workers=0" in stats.verdict.advice[0]
    assert "more workers" not in _text(stats)


# -- the report and the dict -----------------------------------------------------------


def test_report_is_short_and_names_every_measure():
    stats = _stats(
        wait_seconds=9.0,
        fetch_seconds=5.0,
        transform_seconds=3.0,
        collate_seconds=1.0,
        skipped=[(7, "ValueError: bad record")],
        watchdog="no batch for 60 s: batch 3 of epoch 0 in flight\n  stacks...",
    )
    text = str(stats)
    lines = text.splitlines()
    assert 8 <= len(lines) <= 12
    assert lines[0].startswith("stoker: 1,000 batches, 64,000 samples in 10.00 s")
    assert "6.4 k samples/s" in lines[0]
    assert "100.0 batches/s" in lines[0]
    for word in ("workers", "waiting", "stages", "moved", "problems", "verdict", "advice"):
        assert any(line.split()[0] == word for line in lines[1:]), word
    assert "read 2.00 s · transforms 3.00 s · collate 1.00 s" in text
    assert "sample 7" in text
    assert "batch 3 of epoch 0" in text


def test_as_dict_is_json():
    stats = _stats(wait_seconds=9.0, fetch_seconds=9.0, skipped=[(3, "KeyError: 3")])
    data = json.loads(json.dumps(stats.as_dict()))
    assert data["batches"] == 1000
    assert data["samples_per_second"] == pytest.approx(6400.0)
    assert data["batches_per_second"] == pytest.approx(100.0)
    assert data["read_seconds"] == pytest.approx(9.0)
    assert data["skipped"] == [[3, "KeyError: 3"]]
    assert data["verdict"]["kind"] == "input-bound"
    assert data["bottleneck"] == stats.bottleneck


# -- the verdict on real loaders -------------------------------------------------------


def _slow_map(x):
    time.sleep(0.004)
    return x


def _spin(x):
    total = 0
    for i in range(20_000):
        total += i
    return x + (total & 0)


def test_slow_map_and_fast_loop_is_input_bound_on_the_map():
    loader = sk.DataLoader(sk.range(0, 96).map(_slow_map), batch_size=8)
    it = iter(loader)
    for _ in it:
        pass
    stats = it.stats()
    assert (stats.verdict.kind, stats.verdict.stage) == ("input-bound", "transforms")
    assert stats.transform_seconds > stats.read_seconds
    assert stats.transform_seconds <= stats.fetch_seconds
    json.dumps(stats.as_dict())


def test_a_sleeping_map_without_workers_is_called_waiting_not_decoding():
    it = iter(sk.DataLoader(sk.range(0, 96).map(_slow_map), batch_size=8))
    for _ in it:
        pass
    stats = it.stats()
    verdict = stats.verdict
    assert (verdict.kind, verdict.stage) == ("input-bound", "transforms")
    assert "waiting" in verdict.reason, verdict
    assert "decode" not in verdict.reason, verdict
    assert "smaller images" not in " ".join(verdict.advice), verdict
    assert "more workers" in verdict.advice[0], verdict
    assert 0 < stats.cpu_seconds < 0.5 * stats.work_seconds


def test_python_work_without_workers_is_called_computing():
    it = iter(sk.DataLoader(sk.range(0, 96).map(_spin), batch_size=8))
    for _ in it:
        pass
    stats = it.stats()
    assert "waiting" not in stats.verdict.reason, stats.verdict
    assert stats.cpu_seconds >= 0.5 * stats.work_seconds


def test_slow_map_with_thread_workers_is_input_bound_on_the_map(no_thread_leak):
    loader = sk.DataLoader(
        sk.range(0, 96).map(_slow_map), batch_size=4, num_workers=2, worker_mode="thread"
    )
    with loader.iter() as it:
        for _ in it:
            pass
        stats = it.stats()
    assert (stats.verdict.kind, stats.verdict.stage) == ("input-bound", "transforms")
    assert stats.worker_utilisation > 0
    assert stats.queue_seconds >= 0


def test_fast_data_and_slow_loop_is_compute_bound():
    loader = sk.DataLoader(sk.range(0, 64), batch_size=8)
    it = iter(loader)
    for _ in it:
        time.sleep(0.01)  # the training step
    assert it.stats().verdict.kind == "compute-bound"


@pytest.mark.usefixtures("_workers_warm")
def test_fast_data_and_slow_loop_with_process_workers_is_compute_bound():
    loader = sk.DataLoader(sk.range(0, 128), batch_size=4, num_workers=2, worker_mode="process")
    with loader:
        it = iter(loader)
        for _ in it:
            time.sleep(0.01)
        stats = it.stats()
    assert stats.verdict.kind == "compute-bound"
    assert stats.idle_seconds > 0  # the workers had batches ready and waited for the loop
    assert stats.bytes_moved > 0
    assert "more workers" not in _text(stats)


@pytest.mark.usefixtures("_workers_warm")
def test_tiny_records_with_two_process_workers_say_workers_hurt():
    data = list(range(60_000))
    loader = sk.DataLoader(
        sk.from_sequence(data), batch_size=32, num_workers=2, worker_mode="process"
    )
    with loader:
        it = iter(loader)
        for _ in it:
            pass
        stats = it.stats()
    verdict = stats.verdict
    assert (verdict.kind, verdict.stage) == ("input-bound", "hand-off"), str(stats)
    assert "num_workers=0" in verdict.advice[0]
    assert "more workers" not in _text(stats)
    assert stats.transfer_seconds > 0
    assert stats.bytes_moved > 0


def test_tiny_records_inline_keep_no_workers():
    it = iter(sk.DataLoader(sk.from_sequence(list(range(60_000))), batch_size=32))
    for _ in it:
        pass
    stats = it.stats()
    assert "more workers" not in _text(stats)
    assert "num_workers=0" in stats.verdict.advice[0]


def test_python_work_on_thread_workers_never_asks_for_more_workers(no_thread_leak):
    loader = sk.DataLoader(
        sk.range(0, 48).map(_spin), batch_size=4, num_workers=2, worker_mode="thread"
    )
    with loader.iter() as it:
        for _ in it:
            pass
        stats = it.stats()
    assert stats.verdict.kind == "input-bound"
    assert stats.cpu_seconds > 0
    assert "more workers" not in _text(stats), str(stats)


def test_two_threads_sharing_the_gil_at_half_a_core_each_are_told_to_use_processes():
    # Each thread busy all the time and on a CPU 45 % of it: one core between them.
    stats = _stats(
        wait_seconds=8.0,
        fetch_seconds=19.0,
        transform_seconds=18.0,
        collate_seconds=0.5,
        work_seconds=20.0,
        cpu_seconds=9.0,
        num_workers=2,
        worker_mode="thread",
        worker_utilisation=1.0,
        depth=4,
    )
    assert "worker_mode='process'" in stats.verdict.advice[0], str(stats)
    assert "more workers" not in _text(stats)
    assert "gil" in stats.verdict.reason.lower()


def _dies_once(marker):
    def fn(x):
        if x == 9 and not os.path.exists(marker):
            with open(marker, "w"):
                pass
            os._exit(3)
        return x

    return fn


@pytest.mark.usefixtures("_workers_warm")
def test_restarts_are_counted(tmp_path):
    ds = sk.range(0, 24).map(_dies_once(str(tmp_path / "died")))
    loader = sk.DataLoader(
        ds, batch_size=4, num_workers=2, worker_mode="process", restart_workers=True
    )
    with loader:
        it = iter(loader)
        assert [x for b in it for x in b.tolist()] == list(range(24))
        stats = it.stats()
    assert stats.restarts == 1
    assert "restarts 1" in str(stats)


# -- code that auto isolates in processes, and waits that are not decoding -------------


def test_isolated_code_that_mostly_waits_is_told_the_mark_for_threads():
    stats = _stats(
        wait_seconds=8.0,
        fetch_seconds=19.0,
        transform_seconds=18.0,
        collate_seconds=0.1,
        work_seconds=19.0,
        cpu_seconds=1.0,  # the jobs slept: 5 % CPU
        transfer_seconds=0.5,
        num_workers=2,
        worker_mode="process",
        worker_utilisation=0.95,
        depth=4,
        isolated=True,
    )
    verdict = stats.verdict
    assert verdict.stage == "transforms"
    assert "waiting" in verdict.reason
    assert "decode" not in verdict.reason
    assert "@sk.releases_gil" in verdict.advice[0]
    assert "smaller images" not in _text(stats)


def test_isolated_code_cheaper_than_its_hand_off_is_told_the_mark_for_inline():
    stats = _stats(
        wait_seconds=9.0,
        fetch_seconds=0.5,
        collate_seconds=0.1,
        work_seconds=0.6,
        cpu_seconds=0.6,
        transfer_seconds=6.0,
        num_workers=2,
        worker_mode="process",
        worker_utilisation=0.03,
        depth=4,
        isolated=True,
    )
    assert stats.verdict.stage == "hand-off"
    assert "@sk.shares_process" in stats.verdict.advice[0]
    assert "num_workers=0" in stats.verdict.advice[1]


def test_code_that_may_share_the_process_is_not_told_about_marks():
    counters = {
        "wait_seconds": 9.0,
        "fetch_seconds": 0.5,
        "collate_seconds": 0.1,
        "work_seconds": 0.6,
        "cpu_seconds": 0.6,
        "transfer_seconds": 6.0,
        "num_workers": 2,
        "worker_mode": "process",
        "worker_utilisation": 0.03,
        "depth": 4,
    }
    assert "@sk." not in _text(_stats(**counters))


def _sleeps(x):
    time.sleep(0.004)
    return x


def test_a_sleeping_map_on_workers_is_called_waiting_not_decoding(no_leaks):
    loader = sk.DataLoader(sk.range(0, 160).map(_sleeps), batch_size=4, num_workers=2)
    with loader, loader.iter() as it:
        for _ in it:
            pass
        stats = it.stats()
    assert stats.isolated
    assert stats.worker_mode == "process"
    assert stats.verdict.kind == "input-bound", str(stats)
    assert "decode" not in stats.verdict.reason, str(stats)
    assert "smaller images" not in _text(stats), str(stats)
    assert "waiting" in stats.verdict.reason or "@sk.releases_gil" in _text(stats), str(stats)


def _stalls_on_21(x):
    if x == 21:
        time.sleep(0.6)
    return x


def _inline_stats(fn):
    """The stats of an inline pass over 80 records mapped by ``fn``, batch 4."""
    loader = sk.DataLoader(sk.range(0, 80).map(fn), batch_size=4, watchdog=None)
    with loader.iter() as it:
        for _ in it:
            pass
        return it.stats()


def test_an_inline_stall_names_its_batch_and_samples():
    stats = _inline_stats(_stalls_on_21)
    assert stats.slowest_batch == "batch 5 of epoch 0: samples [20, 21, 22, 23]"
    assert stats.slowest_batch_seconds >= 0.6
    assert stats.verdict.kind == "input-bound"
    assert "samples [20, 21, 22, 23]" in stats.verdict.reason
    assert "stalled" in stats.verdict.advice[0]
    assert "smaller images" not in _text(stats)


def test_steady_batches_are_no_stall():
    stats = _stats(
        wait_seconds=9.0,
        fetch_seconds=9.0,
        collate_seconds=0.5,
        slowest_batch_seconds=0.02,  # 2x the average: no stall
        slowest_batch="batch 3 of epoch 0: samples [12]",
    )
    assert "stalled" not in _text(stats)


def _slow_first(x):
    if x == 0:
        time.sleep(0.3)  # the first batch's one-off cost (opening a file, warming a cache)
    return x


def test_a_slow_first_batch_is_not_called_a_stall():
    stats = _inline_stats(_slow_first)
    assert stats.first_batch_seconds >= 0.3
    assert stats.slowest_batch_seconds < 0.3
    assert "stalled" not in _text(stats), str(stats)
