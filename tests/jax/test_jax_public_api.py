import subprocess
import sys

import stoker.jax as sj


def test_every_public_name_is_exported_once_and_exists():
    assert len(sj.__all__) == len(set(sj.__all__))
    assert sj.__all__ == sorted(sj.__all__)
    for name in sj.__all__:
        assert hasattr(sj, name), name


def test_only_stoker_jax_imports_jax():
    code = (
        "import sys, stoker\n"
        "assert 'jax' not in sys.modules\n"
        "import stoker.jax\n"
        "assert 'jax' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
