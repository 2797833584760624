import json
import pickle

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import stoker as sk
from stoker.testing import assert_resumes_exactly, run_epochs


def _pipeline(kind: str, n: int):
    base = sk.range(0, n)
    if kind == "plain":
        return base, None
    if kind == "filter":
        return base.filter(lambda x: x % 3 != 1), None
    if kind == "seeded":
        return base.map(lambda x, rng: (x, int(rng.integers(1 << 30))), seeded=True), None
    if kind == "mix":
        other = sk.range(1000, 1000 + n).map(lambda x: x * 2)
        return sk.mix([base, other], weights=[0.7, 0.3]), None
    if kind == "weighted":
        weights = np.arange(1, n + 1, dtype=float)
        return base, sk.WeightedSampler(weights, num_samples=n + 3, seed=5)
    raise AssertionError(kind)


@given(
    n=st.integers(1, 40),
    batch_size=st.integers(1, 9),
    last_batch=st.sampled_from(["keep", "drop", "rollover"]),
    shuffle=st.booleans(),
    kind=st.sampled_from(["plain", "filter", "seeded", "mix", "weighted"]),
    seed=st.integers(0, 3),
    prefetch=st.sampled_from([0, None, 2]),
)
def test_stop_save_json_resume_in_a_fresh_loader(
    n, batch_size, last_batch, shuffle, kind, seed, prefetch
):
    ds, sampler = _pipeline(kind, n)
    shuffle = shuffle and sampler is None

    def build():
        return sk.DataLoader(
            ds,
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            last_batch=last_batch,
            sampler=sampler,
        )

    assert_resumes_exactly(build(), epochs=2, fresh=build(), max_stops=12)


def test_state_is_json_and_small():
    loader = sk.DataLoader(sk.range(0, 1_000_000), batch_size=256, shuffle=True)
    it = iter(loader)
    next(it)
    text = json.dumps(it.state_dict())
    assert len(text) < 1000


def test_state_after_last_batch_resumes_to_an_empty_rest():
    loader = sk.DataLoader(sk.range(0, 6), batch_size=3)
    it = iter(loader)
    next(it), next(it)
    at_end = it.state_dict()
    assert list(loader.iter(state=at_end)) == []
    assert list(it) == []
    after = it.state_dict()
    assert after["epoch"] == 1
    assert [b.tolist() for b in loader.iter(state=after)] == [[0, 1, 2], [3, 4, 5]]


def test_loader_state_dict_round_trip():
    loader = sk.DataLoader(sk.range(0, 10), batch_size=3, shuffle=True, seed=4)
    assert loader.state_dict()["epoch"] == 0
    it = iter(loader)
    first = next(it).tolist()
    state = json.loads(json.dumps(loader.state_dict()))
    rest = [b.tolist() for b in it]
    other = sk.DataLoader(sk.range(0, 10), batch_size=3, shuffle=True, seed=4)
    other.load_state_dict(state)
    assert [b.tolist() for b in other] == rest
    assert first not in rest
    # after the loop the loader's state is the start of the next epoch
    assert loader.state_dict()["epoch"] == 1
    assert [b.tolist() for b in other] == [b.tolist() for b in loader.iter(epoch=1)]


def test_pickled_iterator_resumes_at_its_position():
    loader = sk.DataLoader(sk.range(0, 20), batch_size=4, shuffle=True, seed=2)
    it = iter(loader)
    next(it)
    clone = pickle.loads(pickle.dumps(it))
    assert [b.tolist() for b in clone] == [b.tolist() for b in it]


def test_resume_of_a_stream():
    ds = sk.from_iterable(lambda: iter(range(23))).map(lambda x: x * 10)
    assert_resumes_exactly(sk.DataLoader(ds, batch_size=4), epochs=2)
    assert_resumes_exactly(sk.DataLoader(ds, batch_size=4, last_batch="drop"), epochs=2)


def test_resume_through_rollover_over_many_epochs():
    loader = sk.DataLoader(
        sk.range(0, 7).filter(lambda x: x != 3), batch_size=4, shuffle=True, last_batch="rollover"
    )
    assert_resumes_exactly(loader, epochs=4)
    flat = [int(x) for b in run_epochs(loader, 4) for x in b]
    assert len(flat) == 24
    assert 3 not in flat


def test_resume_of_a_batched_stream_and_of_a_user_stream():
    ds = sk.from_iterable(lambda: range(10)).map(lambda x: x * 2).batch(3)
    loader = sk.DataLoader(ds, batch_size=None)
    assert [b.tolist() for b in loader] == [[0, 2, 4], [6, 8, 10], [12, 14, 16], [18]]
    assert_resumes_exactly(loader, epochs=2)

    class Counting(sk.IterDataset[int]):
        def __iter__(self):
            return iter(range(7))

    assert_resumes_exactly(sk.DataLoader(Counting(), batch_size=2), epochs=2)
