import pickle

import pytest

import stoker as sk
from stoker._context import Context
from stream_helpers import read_with_states


def assert_resumes_at_every_step(ds, ctx):
    records, states = read_with_states(ds, ctx)
    for k, state in enumerate(states):
        assert list(ds._open(ctx, state)) == records[k:], f"resumed after {k} records"
    return records


def letters():
    return iter("abcdefg")


def numbers(shard):
    return range(shard.index, 20, shard.count)


def test_records_and_fresh_iteration_each_time():
    ds = sk.from_iterable(letters)
    assert list(ds) == list("abcdefg")
    assert list(ds) == list("abcdefg")


def test_factory_that_is_not_callable_is_rejected():
    with pytest.raises(sk.ConfigError, match="from_iterable"):
        sk.from_iterable([1, 2, 3])


def test_without_shard_parameter_each_reader_keeps_every_nth_record():
    ds = sk.from_iterable(lambda: range(10))
    parts = [list(ds._open(Context(shard=sk.Shard(i, 3)), None)) for i in range(3)]
    assert parts == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


def test_with_shard_parameter_the_factory_reads_its_part():
    seen = []

    def factory(shard):
        seen.append(shard)
        return numbers(shard)

    ds = sk.from_iterable(factory)
    assert list(ds._open(Context(shard=sk.Shard(1, 4)), None)) == [1, 5, 9, 13, 17]
    assert seen == [sk.Shard(1, 4)]
    assert list(ds) == list(range(20))
    assert seen[-1] == sk.Shard(0, 1)


def test_keyword_only_shard_parameter_is_used():
    ds = sk.from_iterable(lambda *, shard: numbers(shard))
    assert list(ds._open(Context(shard=sk.Shard(0, 10)), None)) == [0, 10]


@pytest.mark.parametrize("shard", [sk.Shard(0, 1), sk.Shard(2, 3)])
@pytest.mark.parametrize("factory", [letters, numbers])
def test_resume_at_every_step_equals_the_uninterrupted_stream(factory, shard):
    ds = sk.from_iterable(factory)
    records = assert_resumes_at_every_step(ds, Context(shard=shard))
    assert records


def test_reading_is_lazy():
    calls = []
    ds = sk.from_iterable(lambda: calls.append(1) or iter(range(3)))
    cursor = ds._open(Context(), {"steps": 2})
    assert cursor.state_dict() == {"steps": 2}
    assert calls == []
    assert next(cursor) == 2
    assert calls == [1]


def test_public_stateful_protocol():
    ds = sk.from_iterable(letters)
    assert ds.state_dict() == {"steps": 0}
    it = iter(ds)
    assert [next(it), next(it)] == ["a", "b"]
    state = ds.state_dict()
    assert state == {"steps": 2}
    again = sk.from_iterable(letters)
    again.load_state_dict(state)
    assert again.state_dict() == state
    assert "".join(again) == "cdefg"
    assert "".join(again) == "abcdefg"  # the loaded state applies to one iter() only


def test_states_that_do_not_fit():
    ds = sk.from_iterable(letters)
    with pytest.raises(sk.StateError, match="steps"):
        ds.load_state_dict({"count": 1})
    with pytest.raises(sk.StateError, match="steps"):
        ds.load_state_dict({"steps": -1})
    cursor = ds._open(Context(), {"steps": 99})
    with pytest.raises(sk.StateError, match="same records"):
        next(cursor)


def test_pickles_while_being_iterated():
    ds = sk.from_iterable(letters)
    it = iter(ds)
    next(it)
    again = pickle.loads(pickle.dumps(ds))
    assert "".join(again) == "abcdefg"


class Counted(sk.IterDataset[int]):
    def __iter__(self):
        return iter(range(6))


class Stateful(sk.IterDataset[int]):
    def __init__(self, bad_state=False):
        self.position = 0
        self.bad_state = bad_state

    def __iter__(self):
        while self.position < 6:
            self.position += 1
            yield self.position * 10

    def state_dict(self):
        return {"position": self.position if not self.bad_state else object()}

    def load_state_dict(self, state):
        self.position = state["position"]


def test_user_stream_without_state_methods_resumes_by_counting():
    ds = Counted()
    assert assert_resumes_at_every_step(ds, Context()) == list(range(6))
    cursor = ds._open(Context(), None)
    next(cursor)
    assert cursor.state_dict() == {"steps": 1}


def test_user_stream_with_state_methods_reports_its_own_state():
    records = assert_resumes_at_every_step(Stateful(), Context())
    assert records == [10, 20, 30, 40, 50, 60]
    cursor = Stateful()._open(Context(), {"position": 4})
    assert list(cursor) == [50, 60]
    assert cursor.state_dict() == {"position": 6}


def test_user_state_that_is_not_json_is_a_type_error():
    cursor = Stateful(bad_state=True)._open(Context(), None)
    next(cursor)
    with pytest.raises(TypeError, match="JSON"):
        cursor.state_dict()


def test_map_over_a_user_stream_nests_its_state():
    ds = Counted().map(lambda x: x + 1)
    it = iter(ds)
    next(it)
    assert ds.state_dict() == {"count": 1, "parent": {"steps": 1}}
