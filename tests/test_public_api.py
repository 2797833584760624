import pathlib

import pytest

import stoker as sk


def test_every_public_name_is_exported_once_and_exists():
    assert len(sk.__all__) == len(set(sk.__all__))
    for name in sk.__all__:
        assert hasattr(sk, name), name


def test_errors_share_one_root():
    for name in sk.errors.__all__:
        assert issubclass(getattr(sk, name), sk.StokerError)
        assert getattr(sk, name) is getattr(sk.errors, name)
        assert name in sk.__all__, name


def test_every_error_class_is_declared_in_errors_py_and_drawn_in_its_tree():
    """A stoker error declared in another module could not be caught by a name users
    can import; every one lives in ``stoker/errors.py`` and its docstring's tree."""
    import ast

    public = set(sk.errors.__all__)
    elsewhere = []
    for path in pathlib.Path(sk.__file__).parent.rglob("*.py"):
        if path.name == "errors.py" and path.parent.name == "stoker":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {
                    b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
                }
                if bases & public:
                    elsewhere.append(f"{path.name}: {node.name}")
    assert not elsewhere
    tree = sk.errors.__doc__ or ""
    for name in public:
        assert f"── {name}" in tree or name == "StokerError", name


def test_package_is_typed():
    assert (pathlib.Path(sk.__file__).parent / "py.typed").exists()


def test_frameworks_are_imported_only_when_asked_for():
    import subprocess
    import sys

    code = (
        "import sys, stoker as sk\n"
        "loader = sk.DataLoader(sk.range(0, 8), batch_size=4, shard=sk.Shard(0, 2))\n"
        "assert [b.tolist() for b in loader] == [[0, 1, 2, 3]], list(loader)\n"
        "heavy = [m for m in ('torch', 'jax', 'jaxlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_format_libraries_are_imported_only_when_a_source_needs_them():
    import subprocess
    import sys

    code = (
        "import sys, stoker as sk\n"
        "batches = [b.tolist() for b in sk.DataLoader(sk.range(0, 4), batch_size=4)]\n"
        "assert batches == [[0, 1, 2, 3]], batches\n"
        "libs = ('pyarrow', 'polars', 'pandas', 'datasets', 'lance', 'sqlite3')\n"
        "heavy = [m for m in libs if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_file_sources_are_exported():
    for name in ("from_csv", "from_jsonl", "from_sqlite"):
        assert name in sk.__all__, name
        assert callable(getattr(sk, name))


def test_variable_length_helpers_are_public():
    assert {"pack", "pad_collate"} <= set(sk.__all__)
    assert sk.pack.__module__ == "stoker._transforms.pack"


def test_testing_helpers_are_reachable_from_the_package_and_imported_lazily():
    import subprocess
    import sys

    code = (
        "import sys, stoker as sk\n"
        "assert 'stoker.testing' not in sys.modules\n"
        "loader = sk.DataLoader(sk.range(0, 6), batch_size=4, shuffle=True, seed=0)\n"
        "sk.testing.assert_resumes_exactly(loader, epochs=2)\n"
        "assert 'stoker.testing' in sys.modules\n"
        "heavy = [m for m in ('torch', 'jax', 'jaxlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = sk.no_such_name


def test_remote_retry_policy_is_exported_frozen_and_checked():
    policy = sk.RetryPolicy()
    assert "RetryPolicy" in sk.__all__
    assert "RemoteReadError" in sk.__all__
    assert (policy.attempts, policy.backoff, policy.total_seconds) == (10, 0.1, 120.0)
    with pytest.raises(AttributeError):
        policy.attempts = 3  # type: ignore[misc]
    with pytest.raises(sk.ConfigError, match="attempts"):
        sk.RetryPolicy(attempts=0)
    assert issubclass(sk.RemoteReadError, OSError)
