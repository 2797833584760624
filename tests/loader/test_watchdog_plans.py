"""The watchdog and ``timeout`` speak for every plan and every executor.

One record is held back; with ``watchdog=0.5`` a warning names the batch and the
samples in flight (a stream names its part and the positions of the records it
reads: they have no indices) and the stuck frame, whether the batch is built by
thread workers, process workers or the caller's own thread (``num_workers=0``): a
plain map, a filter, ``on_error="skip"``, a stream read by workers, ``sk.pack``.
``LoaderTimeout`` names the same.

The record is held while a file (the flag) exists, so that thread and process
workers see it: the tests let it go once they have seen what they wait for (the
watchdog's report, some periods later; the ``LoaderTimeout``) instead of sleeping a
fixed time.
"""

import logging
import os
import re
import threading
import time

import numpy as np
import pytest

import stoker as sk

pytestmark = pytest.mark.usefixtures("no_leaks")

RECORDS = 64
STUCK = 60  # in the last batches: read after the workers started and the flag is set
HOLD = 30.0  # the longest a record is held, should a test never let it go
QUIET = 1.2  # after its report, the watchdog is watched this long (over 2 periods) for a repeat


def _slow(flag):
    def slow(x):
        if x == STUCK and os.path.exists(flag):
            deadline = time.monotonic() + HOLD
            while os.path.exists(flag) and time.monotonic() < deadline:
                time.sleep(0.005)
        return x

    return slow


class _LetGoAfterReport(logging.Handler):
    """Lets the held record go ``QUIET`` seconds after the watchdog's first report (the
    flag is removed): a second report in that time would be a repeat."""

    def __init__(self, flag):
        super().__init__(logging.WARNING)
        self.timer = threading.Timer(QUIET, flag.unlink, kwargs={"missing_ok": True})

    def emit(self, record):
        if "no batch for" in record.getMessage() and self.timer.ident is None:  # not started
            self.timer.start()


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
    let_go = _LetGoAfterReport(flag)
    logger = logging.getLogger("stoker")
    with caplog.at_level(logging.WARNING, logger="stoker"):
        loader = _loader(plan, workers, flag, watchdog=0.5)
        with loader, loader.iter() as it:
            next(it)  # the workers have started
            caplog.clear()  # a slow start may have been reported
            flag.touch()
            logger.addHandler(let_go)
            try:
                for _ in it:
                    pass
            finally:
                logger.removeHandler(let_go)
                let_go.timer.cancel()
                flag.unlink(missing_ok=True)
                if let_go.timer.is_alive():
                    let_go.timer.join()
            findings = it.stats().watchdog
    warnings = [r.getMessage() for r in caplog.records if "no batch for" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once
    (message,) = warnings
    assert findings is not None
    assert findings in message
    assert re.search(r"next to hand out: batch \d+ of epoch 0", message), message
    if plan == "stream" and workers != "inline":
        # Part 0 of 2 keeps every other record: the stuck one is its record 30.
        assert "part 0 of 2 of the stream in epoch 0: its records 28 to 31" in message, message
    elif plan == "stream":
        assert "(a stream: its records 60 to 63)" in message, message
    elif plan != "stream":
        assert re.search(rf"samples \[[^\]]*\b{STUCK}\b", message), message
    assert re.search(r"line \d+,? in slow\b", message), message  # the stuck frame


@pytest.mark.parametrize("workers", list(WORKERS))
@pytest.mark.parametrize("plan", ["map", "filter", "skip", "pack", "stream"])
def test_loader_timeout_names_the_batch_and_samples_in_flight(plan, workers, tmp_path):
    flag = tmp_path / "stuck"
    loader = _loader(plan, workers, flag, timeout=1.0, watchdog=None)
    with loader, loader.iter() as it:
        _first(it)
        flag.touch()
        try:
            with pytest.raises(sk.LoaderTimeout) as info:
                for _ in it:
                    pass
        finally:
            flag.unlink(missing_ok=True)  # the record is let go: close() need not wait
    text = str(info.value)
    assert "it.stats()" not in text
    assert re.search(r"next to hand out: batch \d+ of epoch 0", text), text
    if plan == "stream" and workers != "inline":
        assert "part 0 of 2 of the stream in epoch 0: its records 28 to 31" in text, text
    elif plan == "stream":
        assert "(a stream: its records 60 to 63)" in text, text
    else:
        assert re.search(rf"samples \[[^\]]*\b{STUCK}\b", text), text
