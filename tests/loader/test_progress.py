"""``len(it)``, progress bars (``progress=True``, ``sk.progress``) and log lines."""

import io
import logging
import time

import pytest
from tqdm import tqdm

import stoker as sk


def _slow(x):
    time.sleep(0.003)
    return x


# -- len(it) ---------------------------------------------------------------------------


def test_len_of_an_iterator_counts_the_batches_left():
    loader = sk.DataLoader(sk.range(0, 10), batch_size=3)
    it = iter(loader)
    assert len(it) == len(loader) == 4
    next(it)
    assert len(it) == 3
    assert len(list(it)) == 3
    assert len(it) == 0


def test_len_of_a_resumed_iterator_counts_from_its_state():
    loader = sk.DataLoader(sk.range(0, 20), batch_size=4, shuffle=True, seed=1)
    it = iter(loader)
    next(it), next(it)
    resumed = loader.iter(state=it.state_dict())
    assert len(resumed) == 3 == len(list(resumed))


def test_len_of_an_unordered_resumed_iterator_leaves_out_the_batches_handed_out_ahead():
    loader = sk.DataLoader(
        sk.range(0, 40).map(_slow), batch_size=2, num_workers=2, worker_mode="thread", ordered=False
    )
    with loader:
        it = loader.iter()
        for _ in range(3):
            next(it)
        state = it.state_dict()
        it.close()
        resumed = loader.iter(state=state)
        assert len(resumed) == len(list(resumed)) == 17


def test_len_of_an_iterator_with_a_filter_or_a_stream_is_a_type_error():
    filtered = iter(sk.DataLoader(sk.range(0, 10).filter(lambda x: x % 2 == 0), batch_size=2))
    with pytest.raises(TypeError, match="not known before reading"):
        len(filtered)
    stream = iter(sk.DataLoader(sk.from_iterable(lambda: iter(range(5))), batch_size=2))
    with pytest.raises(TypeError, match="stream"):
        len(stream)


def test_tqdm_over_an_iterator_shows_the_total():
    out = io.StringIO()
    for _ in tqdm(iter(sk.DataLoader(sk.range(0, 12), batch_size=4)), file=out):
        pass
    assert "3/3" in out.getvalue()


# -- progress bars ---------------------------------------------------------------------


def test_progress_true_draws_a_bar_with_samples_per_second_and_the_verdict(capsys):
    loader = sk.DataLoader(sk.range(0, 40).map(_slow), batch_size=4, progress=True)
    assert [x for b in loader for x in b.tolist()] == list(range(40))
    err = capsys.readouterr().err
    assert "10/10" in err
    assert "samples/s" in err
    assert "input-bound (transforms)" in err


def test_progress_wraps_a_loader_and_keeps_its_state():
    out = io.StringIO()
    loader = sk.DataLoader(sk.range(0, 30), batch_size=5)
    bar = sk.progress(loader, file=out, desc="train")
    assert len(bar) == 6
    first = next(bar)
    assert first.tolist() == [0, 1, 2, 3, 4]
    state = bar.state_dict()
    rest = [b.tolist() for b in bar]
    assert rest == [b.tolist() for b in loader.iter(state=state)]
    assert bar.stats().batches == 6
    text = out.getvalue()
    assert "train" in text
    assert "6/6" in text
    assert "samples/s" in text


def test_progress_over_a_stream_has_no_total():
    out = io.StringIO()
    loader = sk.DataLoader(sk.from_iterable(lambda: iter(range(9))), batch_size=3)
    with sk.progress(iter(loader), file=out) as bar:
        assert sum(len(b) for b in bar) == 9
    assert "3batch" in out.getvalue().replace(" ", "")


def test_progress_refreshes_a_few_times_a_second_not_every_batch():
    out = io.StringIO()
    loader = sk.DataLoader(sk.from_sequence(list(range(40_000))), batch_size=4)
    batches = sum(1 for _ in sk.progress(loader, file=out))
    assert batches == 10_000
    assert "10000/10000" in out.getvalue()
    assert out.getvalue().count("\r") < 100  # one draw per refresh, not per batch


# -- logging ---------------------------------------------------------------------------


def test_log_every_writes_periodic_summaries_at_info(caplog):
    caplog.set_level(logging.INFO, logger="stoker")
    loader = sk.DataLoader(sk.range(0, 60).map(_slow), batch_size=3, log_every=0.04)
    for _ in loader:
        pass
    lines = [r.getMessage() for r in caplog.records if r.name == "stoker"]
    assert len(lines) >= 2
    assert all("samples/s" in line and "input-bound" in line for line in lines), lines
    assert "/20 batches" in lines[0]
    assert lines[-1].endswith("(done)")
    assert "20/20 batches" in lines[-1]


def test_an_info_logger_gets_a_summary_at_the_end_of_each_pass(caplog):
    caplog.set_level(logging.INFO, logger="stoker")
    loader = sk.DataLoader(sk.range(0, 8), batch_size=4)
    for _ in range(2):
        for _ in loader:
            pass
    done = [r.getMessage() for r in caplog.records if r.getMessage().endswith("(done)")]
    assert [line.split(":")[0] for line in done] == ["epoch 0", "epoch 1"]


def test_nothing_is_logged_when_the_logger_is_not_enabled_for_info(caplog):
    caplog.set_level(logging.WARNING, logger="stoker")
    for _ in sk.DataLoader(sk.range(0, 8), batch_size=4):
        pass
    assert not [r for r in caplog.records if r.levelno == logging.INFO]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"progress": "yes"}, "progress must be True"),
        ({"log_every": 0}, "log_every must be a number of seconds > 0"),
        ({"log_every": True}, "log_every must be"),
    ],
)
def test_bad_progress_and_log_every_are_config_errors(kwargs, match):
    with pytest.raises(sk.ConfigError, match=match):
        sk.DataLoader(sk.range(0, 8), batch_size=4, **kwargs)
