import pathlib

import stoker as sk


def test_every_public_name_is_exported_once_and_exists():
    assert len(sk.__all__) == len(set(sk.__all__))
    for name in sk.__all__:
        assert hasattr(sk, name), name


def test_errors_share_one_root():
    for name in (
        "StateError",
        "ConfigError",
        "WorkerError",
        "WorkerCrashed",
        "LoaderTimeout",
        "CollateError",
        "NotSupportedError",
        "FilteredOut",
    ):
        assert issubclass(getattr(sk, name), sk.StokerError)


def test_package_is_typed():
    assert (pathlib.Path(sk.__file__).parent / "py.typed").exists()
