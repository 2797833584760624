"""The executor contract, for every plan: plans x executors, through the public API only.

Each cell is one plan of :data:`cells.PLANS` (map, filter, pack, on_error="skip", a
stream read in parts, a mixture of streams) loaded by one executor of
:data:`cells.EXECUTORS` (inline, thread, process, the default ``auto``, Ray). In every
cell:

* the batches are the inline ones (a stream read by ``n`` workers is deterministic
  for ``n``: its batches are those of thread workers, its records those of inline);
* a state taken mid-epoch resumes exactly, in a loader built afresh (Ray: in the same
  loader, whose actors took seconds to start);
* with ``watchdog=`` small, a record held back is named in the warning (batch and
  sample index; a stream's records have no index, so its part is named) with the
  frame it is stuck in;
* ``timeout=`` raises :class:`~stoker.LoaderTimeout` naming the same, and the batch
  still comes when the record is let go;
* Ctrl-C (a real SIGINT) while ``next()`` waits raises ``KeyboardInterrupt`` at once,
  while the record is still held;
* ``it.close()`` from another thread wakes a consumer blocked in ``next()``, and so
  does ``loader.close()`` (for the map and the stream: it is the executors' close);
* and afterwards nothing is left: no stoker thread, child process, descriptor or
  shared-memory segment (the ``no_leaks`` fixture, in every test).

Ray, whose actors take seconds to start, runs the batches and resume for one plan of
each kind of job (a batch, a chunk read past a filter, a stream's part) and the
properties with a held record for the map and the stream: they are one path of the
window whatever the plan, and every plan runs them on the other executors. The
watchdog is off (``watchdog=None``) except in its own test: it only looks from
outside, and its thread stays a second after the last ``next()``, which every leak
check would wait out.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray_local
from cells import EXECUTORS, FAILING, PLANS, STUCK, Entry, Hold, Plan, as_lists, records_of

import stoker as sk
from stoker.testing import assert_batches_equal, run_epochs

# Ray runs one plan of each kind of job for the batches (one batch, a chunk of records
# past a filter, a stream's part) and the plain map and stream for the rest.
RAY_BATCHES = {"map", "filter", "stream"}
RAY_HELD = {"map", "stream"}
WORKERS = ("thread", "process", "auto", "ray")

# Cells known to fail, (plan, mode, property) -> the cause; each must fail
# (xfail_strict), so its mark goes when the cause is fixed.
KNOWN: dict[tuple[str, str, str], str] = {}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One local Ray instance for the module's Ray cells, started on first use."""
    pytest.importorskip("ray")
    ray = ray_local.local_ray()
    next(ray)
    # The first actors open the driver's connections, which stay: before any snapshot.
    with sk.DataLoader(sk.range(0, 8), batch_size=4, num_workers=2, worker_mode="ray") as loader:
        assert len(list(loader)) == 2
    yield
    next(ray, None)


def _cells(prop: str, ray_plans: set[str] | None, plans: set[str] | None) -> list[Any]:
    out = []
    for plan in PLANS:
        if plans is not None and plan.name not in plans:
            continue
        for entry in EXECUTORS:
            if entry.mode == "ray" and ray_plans is not None and plan.name not in ray_plans:
                continue
            marks = []
            if (reason := KNOWN.get((plan.name, entry.mode, prop))) is not None:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            out.append(pytest.param((plan, entry), id=f"{plan}-{entry}", marks=marks))
    return out


@pytest.fixture
def cell(request: pytest.FixtureRequest) -> tuple[Plan, Entry]:
    """The cell's plan and executor; Ray is started before the leak snapshot."""
    plan, entry = request.param
    if entry.mode == "ray":
        request.getfixturevalue("local_ray")
    request.getfixturevalue("no_leaks")  # every test: nothing left after it
    return plan, entry


def _grid(prop: str, ray_plans: set[str] | None = None, plans: set[str] | None = None) -> Any:
    return pytest.mark.parametrize("cell", _cells(prop, ray_plans, plans), indirect=True)


def _no_hold(x: int) -> int:
    return x


def _order(plan: Plan) -> dict[str, Any]:
    """Shuffled map-style plans (a stream has its own order)."""
    return {} if plan.stream else {"shuffle": True, "seed": 7}


def _reference(plan: Plan, entry: Entry, epochs: int, *, shuffled: bool = True) -> list[Any]:
    """What a cell must yield: inline, or for a stream read in parts, thread workers."""
    like = Entry("thread", entry.num_workers) if plan.stream and entry.num_workers else None
    order = _order(plan) if shuffled else {}
    with plan.loader(like or Entry("inline", 0), _no_hold, **order) as loader:
        return run_epochs(loader, epochs)


# -- the same batches, exact resume ----------------------------------------------------------------


def _copy(batch: Any) -> Any:
    """A batch of its own (a loader may recycle the buffers of the batches it yields)."""
    if isinstance(batch, dict):
        return {key: value.copy() for key, value in batch.items()}
    return batch.copy()


def _two_epochs(loader: Any) -> tuple[list[Any], list[Any], set[str]]:
    """The batches of epochs 0 and 1, the records each epoch skipped, and the modes
    that ran them (``it.stats().worker_mode``)."""
    batches, skipped, modes = [], [], set()
    for epoch in range(2):
        with loader.iter(epoch=epoch) as it:
            batches += [_copy(b) for b in it]
            stats = it.stats()
            skipped.append(stats.skipped)
            modes.add(stats.worker_mode)
    return batches, skipped, modes


@_grid("batches", RAY_BATCHES)
def test_the_same_batches_as_inline_and_a_mid_epoch_state_resumes(
    cell: tuple[Plan, Entry],
) -> None:
    plan, entry = cell
    reference = _reference(plan, entry, 2)
    expected = [as_lists(b) for b in reference]
    per_epoch = len(_reference(plan, entry, 1))
    with plan.loader(entry, _no_hold, watchdog=None, **_order(plan)) as loader:
        got, skipped, modes = _two_epochs(loader)
        assert len(got) == len(reference)
        # The default mode runs user code not marked safe to share this process in
        # worker processes (guarantee 7); the others run what was asked for.
        assert modes == {"process" if entry.mode == "auto" else entry.mode}
        if plan.options.get("on_error") == "skip":  # counted once, in every epoch
            assert skipped == [[(FAILING, f"ValueError: bad record {FAILING}")]] * 2
        for k, (a, b) in enumerate(zip(reference, got, strict=True)):
            assert_batches_equal(a, b, f"batch {k}")  # dtypes and shapes too
        if plan.stream:  # read in parts or not, the same records
            with plan.loader(Entry("inline", 0), _no_hold) as inline:
                assert records_of(got) == records_of(run_epochs(inline, 2))
        it = loader.iter(epoch=0)
        head = [as_lists(next(it)) for _ in range(5)]
        saved = json.dumps(it.state_dict())
        it.close()
        if entry.mode == "ray":  # its actors take seconds to start: the same loader's resume
            rest = [as_lists(b) for b in loader.iter(state=json.loads(saved))]
    if entry.mode != "ray":
        with plan.loader(entry, _no_hold, watchdog=None, **_order(plan)) as fresh:  # a new run
            rest = [as_lists(b) for b in fresh.iter(state=json.loads(saved))]
    assert head + rest == expected[:per_epoch]


# -- a record held back: the watchdog, timeout=, Ctrl-C, close() -----------------------------------


def _first(it: Any) -> Any:
    """The first batch, once the workers have started (a slow start may time out)."""
    while True:
        try:
            return next(it)
        except sk.LoaderTimeout:
            continue  # the batch may still come: next() goes on


def _names_the_record(plan: Plan, entry: Entry, text: str) -> None:
    assert re.search(r"next to hand out: batch \d+ of epoch 0", text), text
    if not plan.stream:
        assert re.search(rf"samples \[[^\]]*\b{STUCK}\b", text), text
    elif entry.num_workers:  # a stream's records have no index: its part is named
        assert re.search(r"part \d of 2 of the stream", text), text


class _LetGoOnReport(logging.Handler):
    """Lets the held record go once the watchdog has reported it, however long the
    report took to write (it asks process workers for their stacks)."""

    def __init__(self, hold: Hold) -> None:
        super().__init__(logging.WARNING)
        self.hold = hold

    def emit(self, record: logging.LogRecord) -> None:
        if "no batch for" in record.getMessage() and self.hold.entered.exists():
            self.hold.open()


def _watchdog_reports(
    plan: Plan, entry: Entry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> tuple[list[str], str | None]:
    """The watchdog's reports while the record is held, and ``it.stats().watchdog``."""
    hold = Hold(tmp_path, seconds=10)
    let_go = _LetGoOnReport(hold)
    logger = logging.getLogger("stoker")
    loader = plan.loader(entry, hold.function(), watchdog=0.2)
    with caplog.at_level(logging.WARNING, logger="stoker"), loader, loader.iter() as it:
        next(it)  # the workers have started
        caplog.clear()  # a slow start may have been reported
        logger.addHandler(let_go)
        hold.close()
        try:
            for _ in it:
                pass
        finally:
            logger.removeHandler(let_go)
            hold.open()
        findings = it.stats().watchdog
    warnings = [r.getMessage() for r in caplog.records if "no batch for" in r.getMessage()]
    return warnings, findings


def _framed(warnings: list[str]) -> list[str]:
    """The reports that show the frame the record is held in (a busy machine may have
    stalled another batch too)."""
    return [w for w in warnings if re.search(r"line \d+,? in hold\b", w)]


@_grid("watchdog", RAY_HELD)
def test_the_watchdog_names_the_record_in_flight(
    cell: tuple[Plan, Entry], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plan, entry = cell
    # A busy machine may stall a batch before the record is reached: the report then
    # shows no held frame, and once the record is let go there is no second stall to
    # report. Such a run is tried again (up to 3 times), each with a gate of its own.
    for attempt in range(3):
        folder = tmp_path / f"attempt-{attempt}"
        folder.mkdir()
        warnings, findings = _watchdog_reports(plan, entry, folder, caplog)
        if _framed(warnings):
            break
    assert findings is not None
    assert any(findings in w for w in warnings)  # it.stats() keeps what was logged
    _names_the_record(plan, entry, (_framed(warnings) or warnings)[-1])
    assert _framed(warnings), warnings[-1]


def _read_until_timeout(it: Any, got: list[Any], hold: Hold) -> sk.LoaderTimeout:
    """Read on until ``LoaderTimeout`` comes while the record is held."""
    while True:
        try:
            for batch in it:
                got.append(as_lists(batch))
        except sk.LoaderTimeout as exc:
            if hold.entered.exists():
                return exc
            continue  # a busy machine stalled an earlier batch: next() goes on
        raise AssertionError(f"no LoaderTimeout: the epoch ended after {len(got)} batches")


@_grid("timeout", RAY_HELD)
def test_loader_timeout_names_the_record_in_flight(
    cell: tuple[Plan, Entry], tmp_path: Path
) -> None:
    plan, entry = cell
    expected = [as_lists(b) for b in _reference(plan, entry, 1, shuffled=False)]
    hold = Hold(tmp_path, seconds=30)
    loader = plan.loader(entry, hold.function(), timeout=0.5, watchdog=None)
    with loader, loader.iter() as it:
        got = [as_lists(_first(it))]
        hold.close()
        try:
            error = _read_until_timeout(it, got, hold)
        finally:
            hold.open()
        text = str(error)
        assert "it.stats()" not in text
        _names_the_record(plan, entry, text)
        got += [as_lists(b) for b in it]  # the batch still comes: nothing lost
    assert got == expected


def _sigint_once_held(hold: Hold) -> threading.Thread:
    """Press Ctrl-C (a SIGINT to this process) once the record is held, as a user would."""

    def press() -> None:
        hold.wait_until_held()
        time.sleep(0.1)  # the consumer waits in next() by now
        os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press, name="ctrl-c", daemon=True)
    presser.start()
    return presser


def _read_all(it: Any) -> None:
    for _ in it:
        pass


@pytest.mark.usefixtures("ctrl_c_raises")  # also in a run started with SIGINT ignored
@_grid("ctrl-c", RAY_HELD)
def test_ctrl_c_while_a_record_is_held_raises_at_once(
    cell: tuple[Plan, Entry], tmp_path: Path
) -> None:
    plan, entry = cell
    hold = Hold(tmp_path, seconds=30)
    loader = plan.loader(entry, hold.function(), watchdog=None)
    with loader, loader.iter() as it:
        next(it)
        hold.close()
        presser = _sigint_once_held(hold)
        try:
            with pytest.raises(KeyboardInterrupt):
                _read_all(it)
            assert not hold.released.exists(), "Ctrl-C waited for the held record"
        finally:
            hold.open()
            presser.join()


def _close_while_blocked(
    plan: Plan, entry: Entry, tmp_path: Path, close: Callable[[Any, Any], None]
) -> tuple[bool, bool, list[str]]:
    """A consumer thread reads until it waits for the held record; then ``close(loader,
    it)`` runs here. Whether the consumer was woken (within 1.5 s), whether the record
    was still held then, and how the consumer's loop ended.

    With workers, the record is let go as soon as the consumer has been woken (and
    ``held`` is whether it was still held at that moment): ``loader.close()`` of thread
    workers then joins a thread that returns at once, instead of waiting out its join
    timeout on a thread that cannot be stopped.
    """
    hold = Hold(tmp_path, seconds=30)
    ended: list[str] = []
    held_when_woken: list[bool] = []

    def consume(it: Any) -> None:
        try:
            _read_all(it)
            ended.append("stopped")
        except sk.StokerError as exc:
            ended.append(type(exc).__name__)
        except BaseException as exc:  # checked by the test, in its own thread
            ended.append(repr(exc))

    with plan.loader(entry, hold.function(), watchdog=None) as loader:
        it = loader.iter()
        next(it)
        hold.close()
        consumer = threading.Thread(target=consume, args=(it,), name="consumer", daemon=True)
        consumer.start()

        def let_go_once_woken() -> None:
            consumer.join(30)
            held_when_woken.append(not hold.released.exists())
            hold.open()

        releaser = threading.Thread(target=let_go_once_woken, name="let-go", daemon=True)
        try:
            hold.wait_until_held()
            consumer.join(0.1)  # it waits in next() by now (inline: it holds the record)
            if entry.num_workers:  # inline: the consumer itself holds the record
                releaser.start()
            close(loader, it)
            # Inline, the consumer is inside the held record (``held`` shows it still is):
            # a short look is enough to see that it was not woken.
            consumer.join(1.5 if entry.num_workers else 0.2)
            woken = not consumer.is_alive()
            held = held_when_woken[0] if held_when_woken else not hold.released.exists()
        finally:
            hold.open()
            consumer.join(30)
            if releaser.is_alive():
                releaser.join(30)
            it.close()
    return woken, held, ended


@_grid("close", RAY_HELD)
def test_close_wakes_a_consumer_blocked_in_next(cell: tuple[Plan, Entry], tmp_path: Path) -> None:
    plan, entry = cell
    woken, held, ended = _close_while_blocked(plan, entry, tmp_path, lambda _, it: it.close())
    if entry.num_workers:
        assert woken, "it.close() did not wake the consumer"
        assert held, "the consumer was woken only once the record was let go"
    else:  # the consumer builds the batch itself, in the held record: it ends after it
        assert not woken
        assert held
    assert ended in (["stopped"], ["IteratorFailed"])


@_grid("loader.close", RAY_HELD, plans={"map", "stream"})
def test_loader_close_wakes_a_consumer_blocked_in_next(
    cell: tuple[Plan, Entry], tmp_path: Path
) -> None:
    """``loader.close()`` ends the workers: a consumer waiting for them is woken (the map
    and the stream: this is the executors' close, whatever the plan)."""
    plan, entry = cell
    woken, held, ended = _close_while_blocked(plan, entry, tmp_path, lambda ld, _: ld.close())
    if entry.num_workers:
        assert woken, "loader.close() did not wake the consumer"
        assert held, "the consumer was woken only once the record was let go"
    else:  # the consumer builds the batch itself, in the held record: it ends after it
        assert not woken
        assert held
    assert ended in (["stopped"], ["IteratorFailed"])
