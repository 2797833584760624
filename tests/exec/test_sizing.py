"""The thread-count policy on synthetic measurements: it decides, it does not time anything."""

from stoker._sizing import GAIN, LOSS, RECHECK, ThreadSizer
from stoker._tuning import FIRST_DECISION, UNSIZED_BATCHES, Tuner, Window


def _io_bound(threads: int) -> dict[str, float]:
    # Every job: 1 ms on a CPU, 99 ms waiting on (simulated) I/O.
    return {"busy": threads * 0.100, "cpu": threads * 0.001, "cpu_wait": 0.0}


def _cpu_bound(threads: int, cores: int = 2) -> dict[str, float]:
    # Every job: 10 ms on a CPU; with more threads than cores, the rest waiting for one.
    wall = 0.010 * max(1.0, threads / cores)
    return {"busy": threads * wall, "cpu": threads * 0.010, "cpu_wait": threads * (wall - 0.010)}


def test_an_io_bound_first_batch_grows_the_threads_at_once_up_to_the_cap():
    s = ThreadSizer(start=4, cores=2, max_workers=64)
    why = s.observe(None, **_io_bound(4), waiting=True, cap=1000)
    assert s.workers == 64
    assert why is not None
    assert "waited on I/O" in why
    assert "64 threads" in why
    assert s.sized


def test_a_first_batch_that_only_partly_waits_on_io_changes_nothing():
    # Starting a pass (opening files, imports) looks like I/O: the first window decides.
    s = ThreadSizer(start=4, cores=2)
    assert s.observe(None, busy=1.0, cpu=0.25, cpu_wait=0.0, waiting=True, cap=1000) is None
    assert s.workers == 4
    assert s.observe(10.0, busy=1.0, cpu=0.25, cpu_wait=0.0, waiting=True, cap=1000) is not None
    assert s.workers == 8


def test_the_estimate_keeps_every_core_busy():
    s = ThreadSizer(start=2, cores=4, max_workers=128)
    # Half the time on a CPU, half on I/O: two threads a core.
    assert s.estimate(busy=1.0, cpu=0.5, cpu_wait=0.0) == 8.0
    # Waiting for a CPU counts for neither: those threads are too many already.
    assert s.estimate(busy=1.0, cpu=0.5, cpu_wait=0.5) == 4.0
    assert s.estimate(busy=1.0, cpu=0.0, cpu_wait=0.0) is None


def test_cpu_bound_threads_that_wait_for_a_cpu_shrink_to_the_cores():
    s = ThreadSizer(start=8, cores=2)
    # Not from the first batch, whose change could not be checked against anything.
    assert s.observe(None, **_cpu_bound(8), waiting=True, cap=1000) is None
    assert s.workers == 8
    why = s.observe(10.0, **_cpu_bound(8), waiting=True, cap=1000)
    assert s.workers == 2
    assert why is not None
    assert "waited for a CPU 75%" in why


def test_threads_short_of_cores_read_their_other_waits_as_contention_not_io():
    # Four threads on two cores (a JPEG pipeline whose maps release the GIL for most of
    # their work): 43 % on a CPU, 39 % waiting for one, 18 % waiting on the GIL. Those
    # 18 % are not I/O: more threads only make them longer.
    s = ThreadSizer(start=4, cores=2)
    assert s.estimate(busy=0.614, cpu=0.265, cpu_wait=0.237) == 2.0
    assert s.observe(None, busy=0.265, cpu=0.101, cpu_wait=0.075, waiting=True, cap=27) is None
    why = s.observe(23.2, busy=0.614, cpu=0.265, cpu_wait=0.237, waiting=True, cap=27)
    assert s.workers == 2
    assert why is not None
    assert "waited for a CPU" in why
    # Were they I/O after all, two threads are slower: undone.
    back = s.observe(15.0, busy=0.5, cpu=0.3, cpu_wait=0.0, waiting=True, cap=27)
    assert s.workers == 4
    assert back is not None
    assert "slower" in back


def test_io_waits_longer_than_the_cpu_waits_still_count_as_io():
    # Oversubscribed, but waiting on I/O longer than for a CPU: the I/O counts.
    s = ThreadSizer(start=4, cores=2)
    assert s.estimate(busy=1.0, cpu=0.2, cpu_wait=0.2) == 8.0


def test_cpu_bound_threads_as_many_as_the_cores_stay():
    s = ThreadSizer(start=2, cores=2)
    for _ in range(20):
        assert s.observe(10.0, **_cpu_bound(2), waiting=True, cap=1000) is None
    assert s.workers == 2


def test_threads_do_not_grow_while_the_consumer_is_the_bottleneck():
    s = ThreadSizer(start=4, cores=2)
    assert s.observe(10.0, **_io_bound(4), waiting=False, cap=1000) is None
    assert s.workers == 4


def test_the_memory_budget_caps_the_threads():
    s = ThreadSizer(start=4, cores=2, max_workers=128)
    s.observe(None, **_io_bound(4), waiting=True, cap=10)
    assert s.workers == 10
    # A budget that shrinks (larger batches) brings the count down with it.
    s = ThreadSizer(start=4, cores=2)
    assert s.observe(10.0, busy=0.4, cpu=0.1, cpu_wait=0.0, waiting=False, cap=3) is not None
    assert s.workers == 3


def test_a_larger_count_that_is_no_faster_is_undone_and_not_tried_again_for_a_while():
    s = ThreadSizer(start=4, cores=2)
    s.observe(100.0, busy=0.4, cpu=0.1, cpu_wait=0.0, waiting=True, cap=1000)  # estimate 8
    assert s.workers == 8
    why = s.observe(100.0 * GAIN * 0.99, **_io_bound(8), waiting=True, cap=1000)
    assert s.workers == 4
    assert why is not None
    assert "no faster than 4" in why
    assert "back to 4 threads" in why
    # The same measurements make it try 8 again only after a while.
    windows = 0
    while s.workers == 4 and windows < 2 * RECHECK:
        s.observe(100.0, busy=0.4, cpu=0.1, cpu_wait=0.0, waiting=True, cap=1000)
        windows += 1
    assert s.workers == 8
    assert windows == RECHECK


def test_a_larger_count_that_is_faster_is_kept():
    s = ThreadSizer(start=4, cores=2)
    s.observe(100.0, busy=0.4, cpu=0.1, cpu_wait=0.0, waiting=True, cap=1000)
    assert s.workers == 8
    # Twice the batches a second, and the estimate still says 8: it stays.
    assert s.observe(200.0, busy=0.8, cpu=0.2, cpu_wait=0.0, waiting=True, cap=1000) is None
    assert s.workers == 8


def test_a_smaller_count_that_is_slower_is_undone():
    s = ThreadSizer(start=8, cores=2)
    s.observe(100.0, **_cpu_bound(8), waiting=True, cap=1000)
    assert s.workers == 2
    why = s.observe(100.0 * LOSS * 0.9, **_cpu_bound(2), waiting=True, cap=1000)
    assert s.workers == 8
    assert why is not None
    assert "slower than 8" in why
    # Not fewer again for a while, whatever the estimate says.
    for _ in range(RECHECK - 1):
        s.observe(100.0, **_cpu_bound(8), waiting=True, cap=1000)
        assert s.workers == 8


def test_the_first_change_is_not_checked():
    s = ThreadSizer(start=4, cores=2)
    s.observe(None, **_io_bound(4), waiting=True, cap=1000)
    grown = s.workers
    assert s.observe(1.0, **_io_bound(grown), waiting=True, cap=1000) is None
    assert s.workers == grown


def test_the_tuner_grows_the_batches_in_flight_with_the_threads():
    t = Tuner(4, sizer=ThreadSizer(start=4, cores=2, max_workers=64))
    assert t.decision.workers == 4
    assert t.decision.depth == 8
    first = Window(
        1, 0.4, 0.4, 0.4, batch_bytes=1 << 10, worker_seconds=0.4, cpu_seconds=0.004, first=True
    )
    d = t.observe(first)
    assert (d.workers, d.depth) == (64, 128)
    assert t.max_depth() == 256
    # The first batch decides only the thread count; the other rules wait for a window.
    assert not d.inline
    assert t.due(FIRST_DECISION)
    assert not t.due(FIRST_DECISION - 1)
    assert t.history == [d]


def test_the_tuner_keeps_threads_within_the_memory_budget_and_a_fixed_prefetch():
    t = Tuner(4, memory_budget=100 << 20, sizer=ThreadSizer(start=4, cores=2))
    big = 10 << 20  # ten batches fit the budget
    d = t.observe(Window(1, 0.4, 0.4, 0.4, big, worker_seconds=0.4, cpu_seconds=0.004, first=True))
    assert d.workers == 10
    assert d.depth == 10
    fixed = Tuner(4, 6, auto_depth=False, sizer=ThreadSizer(start=4, cores=2))
    d = fixed.observe(
        Window(1, 0.4, 0.4, 0.4, 1024, worker_seconds=0.4, cpu_seconds=0.004, first=True)
    )
    assert d.workers == 6
    assert d.depth == 6


def test_a_tuner_without_a_sizer_keeps_its_workers():
    t = Tuner(2)
    d = t.observe(Window(1, 0.4, 0.4, 0.4, 1024, worker_seconds=0.4, cpu_seconds=0.004, first=True))
    assert d is t.decision
    assert d.workers == 2
    d = t.observe(
        Window(64, 64 * 0.010, 64 * 0.005, 64 * 0.006, worker_seconds=0.64, cpu_seconds=0.001)
    )
    assert d.workers == 2


def test_threads_and_batches_in_flight_stay_bounded_when_a_batch_has_no_known_size():
    t = Tuner(4, sizer=ThreadSizer(start=4, cores=2, max_workers=128))
    d = t.observe(Window(1, 0.4, 0.4, 0.4, 0, worker_seconds=0.4, cpu_seconds=0.001, first=True))
    assert d.workers == UNSIZED_BATCHES
    assert t.max_depth() == UNSIZED_BATCHES
