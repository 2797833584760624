"""The watchdog and ``timeout`` speak for every plan and every executor.

One record sleeps; with ``watchdog=0.5`` a warning names the batch and the samples
in flight (a stream names its part: its records have no indices) and the stuck
frame, whether the batch is built by thread workers, process workers or the
caller's own thread (``num_workers=0``): a plain map, a filter, ``on_error="skip"``,
a stream read by workers, ``sk.pack``. ``LoaderTimeout`` names the same.
"""

import logging
import os
import re
import time

import numpy as np
import pytest

import stoker as sk

pytestmark = pytest.mark.usefixtures("no_leaks")

RECORDS = 64
STUCK = 60  # in the last batches: read after the workers started and the flag is set
SLEEP = 2.5


def _slow(flag):
    def slow(x):
        if x == STUCK and os.path.exists(flag):
            time.sleep(SLEEP)
        return x

    return slow


def _tokens(flag):
    slow = _slow(flag)

    def tokens(x):
        return {"tokens": np.full(3 + slow(x) % 4, x, dtype=np.int64)}

    return tokens


def _even(x):
    return x % 2 == 0


PLANS = {
    "map": lambda f: (sk.range(0, RECORDS).map(_slow(f)), {}),
    "filter": lambda f: (sk.range(0, RECORDS).map(_slow(f)).filter(_even), {}),
    "skip": lambda f: (sk.range(0, RECORDS).map(_slow(f)), {"on_error": "skip"}),
    "stream": lambda f: (sk.from_iterable(lambda: range(RECORDS)).map(_slow(f)), {}),
    "pack": lambda f: (sk.pack(sk.range(0, RECORDS).map(_tokens(f)), 8), {}),
}
WORKERS = {
    "inline": {"num_workers": 0},
    "thread": {"num_workers": 2, "worker_mode": "thread"},
    "process": {"num_workers": 2, "worker_mode": "process"},
}


def _first(it):
    """The first batch, once the workers have started (a slow start may time out)."""
    while True:
        try:
            return next(it)
        except sk.LoaderTimeout:
            continue  # the batch may still come: next() goes on


def _loader(plan, workers, flag, **options):
    dataset, extra = PLANS[plan](str(flag))
    return sk.DataLoader(dataset, batch_size=4, **WORKERS[workers], **extra, **options)


@pytest.mark.parametrize("workers", list(WORKERS))
@pytest.mark.parametrize("plan", list(PLANS))
def test_a_stuck_record_is_reported_for_every_plan(plan, workers, tmp_path, caplog):
    flag = tmp_path / "stuck"
    with caplog.at_level(logging.WARNING, logger="stoker"):
        loader = _loader(plan, workers, flag, watchdog=0.5)
        with loader, loader.iter() as it:
            next(it)  # the workers have started
            caplog.clear()  # a slow start may have been reported
            flag.touch()
            for _ in it:
                pass
            findings = it.stats().watchdog
    warnings = [r.getMessage() for r in caplog.records if "no batch for" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once
    (message,) = warnings
    assert findings is not None
    assert findings in message
    assert re.search(r"next to hand out: batch \d+ of epoch 0", message), message
    if plan == "stream" and workers != "inline":
        assert re.search(r"part \d of 2 of the stream", message), message
    elif plan != "stream":
        assert re.search(rf"samples \[[^\]]*\b{STUCK}\b", message), message
    assert re.search(r"line \d+,? in slow\b", message), message  # the stuck frame


@pytest.mark.parametrize("workers", list(WORKERS))
@pytest.mark.parametrize("plan", ["map", "filter", "skip", "pack"])
def test_loader_timeout_names_the_batch_and_samples_in_flight(plan, workers, tmp_path):
    flag = tmp_path / "stuck"
    loader = _loader(plan, workers, flag, timeout=1.0, watchdog=None)
    with loader, loader.iter() as it:
        _first(it)
        flag.touch()
        with pytest.raises(sk.LoaderTimeout) as info:
            for _ in it:
                pass
    text = str(info.value)
    assert "it.stats()" not in text
    assert re.search(r"next to hand out: batch \d+ of epoch 0", text), text
    assert re.search(rf"samples \[[^\]]*\b{STUCK}\b", text), text
