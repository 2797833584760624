import numpy as np
import pytest

import stoker as sk


def test_batch_size_must_be_positive():
    with pytest.raises(sk.ConfigError, match="batch_size"):
        sk.DataLoader(sk.range(0, 4), batch_size=0)
    with pytest.raises(sk.ConfigError, match="batch_size"):
        sk.DataLoader(sk.range(0, 4), batch_size=2.5)


def test_shuffle_with_sampler_conflicts():
    with pytest.raises(sk.ConfigError, match="shuffle=True conflicts with sampler"):
        sk.DataLoader(sk.range(0, 4), shuffle=True, sampler=sk.SequentialSampler(4))


def test_sampler_with_batch_sampler_conflicts():
    bs = sk.BatchSampler(sk.SequentialSampler(4), batch_size=2)
    with pytest.raises(sk.ConfigError, match=r"sampler=\.\.\. conflicts with batch_sampler"):
        sk.DataLoader(sk.range(0, 4), sampler=sk.SequentialSampler(4), batch_sampler=bs)
    with pytest.raises(sk.ConfigError, match="batch_size conflicts"):
        sk.DataLoader(sk.range(0, 4), batch_size=2, batch_sampler=bs)


def test_arrays_of_unequal_length():
    with pytest.raises(sk.ConfigError, match="length"):
        sk.from_arrays(x=np.zeros(3), y=np.zeros(4))


def test_empty_dataset_is_refused_when_the_loader_is_built():
    with pytest.raises(ValueError, match="empty"):
        sk.DataLoader(sk.from_sequence([]), batch_size=2)


def test_map_needs_a_callable():
    with pytest.raises(TypeError, match="callable"):
        sk.range(0, 3).map(42)


def test_unknown_modes():
    with pytest.raises(sk.ConfigError, match="last_batch"):
        sk.DataLoader(sk.range(0, 4), last_batch="partial")
    with pytest.raises(sk.ConfigError, match="worker_mode"):
        sk.DataLoader(sk.range(0, 4), worker_mode="fibers")


def test_worker_settings_that_contradict_each_other():
    with pytest.raises(sk.ConfigError, match="needs num_workers >= 1"):
        sk.DataLoader(sk.range(0, 4), worker_mode="process")
    with pytest.raises(sk.ConfigError, match="inline"):
        sk.DataLoader(sk.range(0, 4), worker_mode="inline", num_workers=2)
    with pytest.raises(sk.ConfigError, match="start_method"):
        sk.DataLoader(sk.range(0, 4), num_workers=1, start_method="vfork")
    with pytest.raises(sk.ConfigError, match="worker_init_arg"):
        sk.DataLoader(sk.range(0, 4), num_workers=1, worker_init_arg=3)


def test_state_from_another_length_or_seed_is_refused():
    it = iter(sk.DataLoader(sk.range(0, 10), batch_size=2, shuffle=True, seed=1))
    next(it)
    state = it.state_dict()
    with pytest.raises(sk.StateError, match="dataset_len"):
        sk.DataLoader(sk.range(0, 11), batch_size=2, shuffle=True, seed=1).iter(state=state)
    with pytest.raises(sk.StateError, match="seed"):
        sk.DataLoader(sk.range(0, 10), batch_size=2, shuffle=True, seed=2).iter(state=state)
    with pytest.raises(sk.StateError, match="batch_size"):
        sk.DataLoader(sk.range(0, 10), batch_size=3, shuffle=True, seed=1).load_state_dict(state)
    with pytest.raises(sk.StateError, match="format"):
        sk.DataLoader(sk.range(0, 10), batch_size=2).iter(state={"epoch": 0})


def test_state_errors_are_value_errors():
    assert issubclass(sk.StateError, ValueError)
    assert issubclass(sk.ConfigError, ValueError)


def test_ragged_records_name_the_field_and_point_at_pad_collate():
    ds = sk.from_sequence([{"tokens": np.zeros(i + 1)} for i in range(4)])
    with pytest.raises(sk.CollateError, match=r"\['tokens'\].*pad_collate"):
        list(sk.DataLoader(ds, batch_size=2))
    batch = next(iter(sk.DataLoader(ds, batch_size=2, collate_fn=sk.pad_collate)))
    assert batch["tokens"].shape == (2, 2)


def test_one_shot_iterator_is_refused():
    with pytest.raises(sk.ConfigError, match="from_iterable"):
        sk.DataLoader((i for i in range(3)), batch_size=2)


def test_stream_with_shuffle_is_refused():
    with pytest.raises(sk.ConfigError, match="map-style"):
        sk.DataLoader(sk.from_iterable(lambda: range(3)), shuffle=True)


def test_sampler_for_another_length_is_refused():
    with pytest.raises(sk.ConfigError):
        sk.DataLoader(sk.range(0, 5), sampler=sk.RandomSampler(6))
