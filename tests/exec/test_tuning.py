"""The tuning policy on synthetic measurements: it decides, it does not time anything."""

from stoker._tuning import (
    FIRST_DECISION,
    LATER_DECISIONS,
    TRIAL_BACKOFF,
    TRIAL_BATCHES,
    Tuner,
    Window,
)


def _run(tuner: Tuner, window: Window, rounds: int = 10):
    decisions = []
    for _ in range(rounds):
        decisions.append(tuner.observe(window))
    return decisions


def test_the_first_decision_comes_after_a_few_batches_and_later_ones_slowly():
    t = Tuner(num_workers=2)
    assert not t.due(FIRST_DECISION - 1)
    assert t.due(FIRST_DECISION)
    t.observe(Window(FIRST_DECISION, 0.08, 0.0, 0.1))
    assert not t.due(FIRST_DECISION)
    assert t.due(LATER_DECISIONS)


def test_input_bound_keeps_workers_and_adds_batches_in_flight_up_to_the_cap():
    # Building a batch takes 10 ms; two workers halve what the consumer waits.
    t = Tuner(num_workers=2)
    decisions = _run(t, Window(64, 64 * 0.010, 64 * 0.005, 64 * 0.006))
    assert not any(d.inline for d in decisions)
    assert decisions[-1].depth == t.max_depth() == 8
    assert "waited" in decisions[-1].reason


def test_compute_bound_keeps_workers_with_one_batch_in_flight_per_worker():
    # Batches are always ready: the consumer's own step is the bottleneck.
    t = Tuner(num_workers=2, depth=6)
    decisions = _run(t, Window(64, 64 * 0.010, 0.0, 64 * 0.020))
    assert not any(d.inline for d in decisions)
    assert decisions[-1].depth == 2
    assert any("always ready" in d.reason for d in decisions)


def test_workers_that_hurt_are_replaced_by_inline_building():
    # 20 us of work, and the consumer waits 40 us a batch for workers: 2x.
    t = Tuner(num_workers=2)
    hurt = Window(8, 8 * 20e-6, 8 * 40e-6, 8 * 70e-6)
    assert not t.observe(hurt).inline  # once may be a slow moment of the machine
    assert t.due(8)  # so it looks again soon
    d = t.observe(hurt)
    assert d.inline
    assert d.depth == 1
    assert "hand-off costs more than the work" in d.reason
    # Inline, batches stay cheap: it stays inline.
    assert t.observe(Window(64, 64 * 20e-6, 64 * 25e-6, 64 * 30e-6, inline=True)).inline


def test_a_hand_off_many_times_the_work_decides_in_one_window():
    # Tiny records: 20 us of work, 200 us of waiting a batch (well below a ms): the
    # wait is the hand-off itself, paid by every batch.
    t = Tuner(num_workers=2)
    d = t.observe(Window(8, 8 * 20e-6, 8 * 200e-6, 8 * 250e-6))
    assert d.inline
    assert "hand-off costs more than the work" in d.reason


def test_a_short_job_costs_its_cpu_time_inline():
    # On a thread, 60 us of wall time of which 20 us CPU (the rest waiting for the
    # GIL): inline the batch costs ~20 us, and 80 us of waiting is 4x that.
    t = Tuner(num_workers=2)
    w = Window(8, 8 * 60e-6, 8 * 80e-6, 8 * 100e-6, cpu_seconds=8 * 20e-6)
    d = t.observe(w)
    assert d.inline
    assert "than the 20 us it takes" in d.reason


def test_a_short_job_that_waits_on_io_costs_its_wall_time():
    # 500 us of wall time, 50 us CPU: inline it would wait on the I/O as long.
    t = Tuner(num_workers=4)
    w = Window(8, 8 * 500e-6, 8 * 200e-6, 8 * 220e-6, cpu_seconds=8 * 50e-6)
    assert not any(t.observe(w).inline for _ in range(4))


def test_a_long_job_costs_its_wall_time_even_when_it_waits_on_io():
    # 5 ms of wall time, 0.1 ms CPU (the rest is I/O): inline it would cost 5 ms.
    t = Tuner(num_workers=8)
    w = Window(8, 8 * 5e-3, 8 * 0.9e-3, 8 * 1e-3, cpu_seconds=8 * 0.1e-3)
    assert not any(t.observe(w).inline for _ in range(4))


def test_one_slow_window_decides_nothing():
    t = Tuner(num_workers=2)
    slow, normal = Window(8, 8 * 1e-3, 8 * 15e-3, 8 * 16e-3), Window(8, 8 * 1e-3, 8e-4, 8e-3)
    for window in (slow, normal, normal, slow, normal, normal):
        assert not t.observe(window).inline


# Two threads fighting for the GIL: 700 us of wall time a job, 330 us of it CPU; the
# consumer waits 360 us a batch. Not "hurt" by the estimates (the CPU time is inflated
# by the fight), so only building a few batches inline can tell.
GIL_BOUND = Window(32, 32 * 700e-6, 32 * 360e-6, 32 * 390e-6, cpu_seconds=32 * 330e-6)


def _tried(t: Tuner):
    assert not t.observe(GIL_BOUND).inline  # once: look again soon
    assert t.due(FIRST_DECISION)
    d = t.observe(GIL_BOUND)
    assert d.inline
    assert d.trial
    assert d.depth == 1
    assert f"trying {TRIAL_BATCHES} batches inline" in d.reason
    assert t.due(TRIAL_BATCHES)
    assert not t.due(TRIAL_BATCHES - 1)
    return d


def test_a_try_of_inline_keeps_it_when_batches_came_faster():
    t = Tuner(num_workers=2)
    _tried(t)
    n = TRIAL_BATCHES
    d = t.observe(Window(n, n * 100e-6, n * 110e-6, n * 120e-6, inline=True))
    assert d.inline
    assert not d.trial
    assert "a batch took 120 us, against 390 us with workers" in d.reason
    # Later inline windows keep it, as after any inline decision.
    assert t.observe(Window(64, 64 * 100e-6, 64 * 110e-6, 64 * 120e-6, inline=True)).inline


def test_a_try_of_inline_that_was_slower_goes_back_to_workers_and_waits_longer():
    t = Tuner(num_workers=2)
    before = t.decision.depth
    n = TRIAL_BATCHES
    slower = Window(n, n * 800e-6, n * 800e-6, n * 820e-6, inline=True)
    _tried(t)
    for backoff in (TRIAL_BACKOFF, 2 * TRIAL_BACKOFF):
        d = t.observe(slower)
        assert not d.inline
        assert not d.trial
        assert d.depth >= before
        assert "a batch took 820 us, against 390 us with workers: workers" in d.reason
        for _ in range(backoff):  # no try for a while, however the windows look
            assert not t.observe(GIL_BOUND).inline
        assert t.observe(GIL_BOUND).trial  # then the next one
    assert sum(x.trial for x in t.history) == 3


def test_parallel_workers_are_never_tried_inline():
    # Two workers building 10 ms batches in parallel: the consumer waits ~5 ms.
    t = Tuner(num_workers=2)
    w = Window(32, 32 * 10e-3, 32 * 5e-3, 32 * 5.2e-3, cpu_seconds=32 * 9e-3)
    assert not any(t.observe(w).inline for _ in range(10))


def test_inline_goes_back_to_workers_when_batches_become_expensive():
    t = Tuner(num_workers=2)
    t.observe(Window(8, 8 * 20e-6, 8 * 200e-6, 8 * 250e-6))
    t.observe(Window(8, 8 * 20e-6, 8 * 200e-6, 8 * 250e-6))
    d = t.observe(Window(64, 64 * 5e-3, 64 * 5e-3, 64 * 5e-3, inline=True))
    assert not d.inline
    assert d.depth == 4
    assert "back to workers" in d.reason
    assert [x.inline for x in t.history][-2:] == [True, False]


def test_the_memory_budget_caps_the_batches_in_flight():
    t = Tuner(num_workers=4, memory_budget=1 << 30)
    decisions = _run(t, Window(64, 64 * 0.010, 64 * 0.005, 64 * 0.006, batch_bytes=300 << 20))
    assert t.max_depth() == 3
    assert all(d.depth <= 3 for d in decisions)


def test_fixed_settings_are_left_alone():
    t = Tuner(num_workers=2, depth=5, auto_depth=False, auto_inline=False)
    for window in (
        Window(8, 8 * 20e-6, 8 * 200e-6, 8 * 250e-6),  # workers hurt
        Window(64, 64 * 0.010, 0.0, 64 * 0.020),  # compute-bound
    ):
        d = t.observe(window)
        assert not d.inline
        assert d.depth == 5


def test_an_empty_window_changes_nothing():
    t = Tuner(num_workers=2)
    before = t.decision
    assert t.observe(Window(0, 0.0, 0.0, 0.0)) is before
