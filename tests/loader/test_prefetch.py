import time

import stoker as sk


def _slow(x):
    time.sleep(0.001)
    return x


def test_auto_prefetch_uses_a_thread_when_there_is_work_to_overlap(no_thread_leak):
    loader = sk.DataLoader(sk.range(0, 40).map(_slow), batch_size=2)
    it = iter(loader)
    got = []
    for batch in it:
        got.extend(batch.tolist())
        time.sleep(0.003)  # the training step
    assert got == list(range(40))
    assert it.stats().prefetch.startswith("background thread")


def test_auto_prefetch_stays_on_the_caller_thread_without_a_step():
    it = iter(sk.DataLoader(sk.range(0, 40).map(_slow), batch_size=2))
    assert [x for b in it for x in b.tolist()] == list(range(40))
    assert it.stats().prefetch == "caller thread"


def test_auto_prefetch_stays_on_the_caller_thread_for_cheap_batches():
    it = iter(sk.DataLoader(sk.range(0, 100), batch_size=2))
    for _ in it:
        time.sleep(0.001)
    assert it.stats().prefetch == "caller thread"


def test_prefetch_zero_never_starts_a_thread(no_thread_leak):
    it = iter(sk.DataLoader(sk.range(0, 40).map(_slow), batch_size=2, prefetch=0))
    for _ in it:
        time.sleep(0.002)
    assert it.stats().prefetch == "caller thread"
