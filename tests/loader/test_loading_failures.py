import threading
import time

import pytest

import stoker as sk


def _explode_at(bad):
    def fn(x):
        if x in bad:
            raise ValueError(f"bad record {x}")
        return x

    return fn


@pytest.mark.parametrize("prefetch", [0, 2])
def test_exception_keeps_its_type_and_names_the_sample(prefetch, no_thread_leak):
    loader = sk.DataLoader(sk.range(0, 20).map(_explode_at({13})), batch_size=4, prefetch=prefetch)
    with pytest.raises(ValueError, match="bad record 13") as info:
        list(loader)
    notes = "\n".join(info.value.__notes__)
    assert "sample index 13" in notes
    assert "batch 3 of epoch 0" in notes
    assert info.value.sample_index == 13


def test_on_error_skip_skips_up_to_max_errors_and_stays_resumable():
    ds = sk.range(0, 20).map(_explode_at({2, 7}))
    loader = sk.DataLoader(ds, batch_size=4, on_error="skip", max_errors=2)
    it = iter(loader)
    batches = [b.tolist() for b in it]
    assert [x for b in batches for x in b] == [x for x in range(20) if x not in (2, 7)]
    assert [len(b) for b in batches] == [4, 4, 4, 4, 2]
    assert [i for i, _ in it.stats().skipped] == [2, 7]
    from stoker.testing import assert_resumes_exactly

    assert_resumes_exactly(loader)
    strict = sk.DataLoader(ds, batch_size=4, on_error="skip", max_errors=1)
    with pytest.raises(ValueError, match="bad record 7"):
        list(strict)


def test_timeout_raises_loader_timeout(no_thread_leak):
    release = threading.Event()

    def slow(x):
        if x == 4:
            release.wait(10)
        return x

    loader = sk.DataLoader(sk.range(0, 8).map(slow), batch_size=4, timeout=0.2)
    it = iter(loader)
    next(it)
    with pytest.raises(sk.LoaderTimeout):
        next(it)
    release.set()
    it.close()


def test_breaking_out_of_a_loop_ends_the_thread(no_thread_leak):
    loader = sk.DataLoader(
        sk.range(0, 1000).map(lambda x: time.sleep(0.0002) or x), batch_size=4, prefetch=2
    )
    for k, _ in enumerate(loader):
        if k == 3:
            break


def test_garbage_collected_iterator_ends_its_thread(no_thread_leak):
    loader = sk.DataLoader(sk.range(0, 1000), batch_size=4, prefetch=2)
    it = iter(loader)
    next(it)
    assert any(t.name.startswith("stoker-") for t in threading.enumerate())
    del it


def test_with_block_closes(no_thread_leak):
    loader = sk.DataLoader(sk.range(0, 1000), batch_size=4, prefetch=1)
    with iter(loader) as it:
        next(it)
    assert list(it) == []


def test_stats_report_mode_and_verdict():
    it = iter(sk.DataLoader(sk.range(0, 100), batch_size=10))
    for _ in it:
        pass
    stats = it.stats()
    assert (stats.batches, stats.samples, stats.worker_mode) == (10, 100, "inline")
    assert stats.bottleneck
    assert "caller thread" in stats.prefetch


@pytest.mark.parametrize("prefetch", [0, 2])
def test_next_after_a_failure_goes_on_with_the_next_batch_and_the_state_resumes(prefetch):
    loader = sk.DataLoader(sk.range(0, 16).map(_explode_at({5})), batch_size=4, prefetch=prefetch)
    it = iter(loader)
    assert next(it).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="bad record 5"):
        next(it)
    state = it.state_dict()
    assert state["batches"] == 1  # the last good batch
    fixed = sk.DataLoader(sk.range(0, 16).map(lambda x: x), batch_size=4)
    assert next(iter(fixed.iter(state=state))).tolist() == [4, 5, 6, 7]
    assert next(it).tolist() == [8, 9, 10, 11]  # as with PyTorch: the failed batch is lost
    after = it.state_dict()
    assert [b.tolist() for b in fixed.iter(state=after)] == [[12, 13, 14, 15]]
    assert [b.tolist() for b in it] == [[12, 13, 14, 15]]


def test_ctrl_c_while_loading_leaves_a_resumable_iterator(no_thread_leak):
    def interrupt(x):
        if x == 6:
            raise KeyboardInterrupt
        return x

    loader = sk.DataLoader(sk.range(0, 12).map(interrupt), batch_size=4, prefetch=2)
    it = iter(loader)
    assert next(it).tolist() == [0, 1, 2, 3]
    with pytest.raises(KeyboardInterrupt):
        next(it)
    with pytest.raises(sk.IteratorFailed):
        next(it)
    assert it.state_dict()["batches"] == 1
