"""The README's examples run as a new user runs them: pasted into a script, no main guard.

Each test writes a script to a temporary directory and runs it with this interpreter
in a subprocess, so that worker processes start the way they do for users: the
fork server (or ``spawn``) sees a real ``__main__`` file whose loop is not under
``if __name__ == "__main__":``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SCRIPT_SECONDS = 240


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _run(tmp_path: Path, source: str, name: str = "example.py") -> subprocess.CompletedProcess[str]:
    script = tmp_path / name
    script.write_text(source)
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SCRIPT_SECONDS,
        check=False,
    )


def test_the_readme_has_an_example_with_workers():
    blocks = _python_blocks()
    assert blocks
    assert any("num_workers=" in block for block in blocks)


def test_the_readme_is_a_front_door():
    """Short enough to read (the details live in docs/), and opening with the two
    commands, each with how long it takes."""
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 12 * 1024
    commands = re.findall(r"```bash\n(.*?)```", text, flags=re.S)[:2]
    assert commands[0].rstrip().endswith("stoker bench --quick")
    assert commands[1].rstrip().endswith("python -m pytest")
    after = text[text.index(commands[1]) : text.index("```python")]
    assert len(re.findall(r"\d+ (?:s|min|minutes)\b", after)) >= 2, "say how long each takes"
    for page in ("docs/benchmarks.md", "docs/migrating.md", "docs/guide.md"):
        assert f"]({page})" in text, page


def test_readme_examples_run_as_one_script_without_a_main_guard(tmp_path):
    """Every ```python block, top to bottom, as one script pasted by a new user on a
    CPU machine: nothing left undefined, the device chosen by what is there.

    The script ends with loaders still open and must print no traceback (the exit
    race with multiprocessing's own handler is tested many times over in
    tests/exec/test_quiet_exit.py).
    """
    pytest.importorskip("torch")
    blocks = _python_blocks()
    source = "\n".join(blocks)
    assert "__main__" not in source
    assert 'device="cuda"' not in source
    result = _run(tmp_path, source)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Traceback" not in result.stderr, result.stderr[-4000:]


GUARDLESS = """\
import numpy as np
import stoker as sk

images = np.random.default_rng(0).random((512, 3, 8, 8), dtype=np.float32)


def augment(record, rng):
    return {{**record, "image": record["image"] * rng.random()}}


class Records(sk.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return {{"x": np.full(3, i)}}


ds = sk.from_arrays(image=images).map(augment, seeded=True)
loader = sk.DataLoader(
    ds, batch_size=64, shuffle=True, num_workers=2, start_method={method!r}, {extra}
)
with loader:
    for epoch in range(2):
        it = iter(loader)
        for batch in it:
            assert batch["image"].shape == (64, 3, 8, 8)
        print("mode", it.stats().worker_mode, it.stats().batches)
with sk.DataLoader(Records(), batch_size=8, num_workers=2) as plain:
    it = iter(plain)
    total = sum(int(b["x"][:, 0].sum()) for b in it)
    print("own class", it.stats().worker_mode, total)
"""


@pytest.mark.parametrize("method", ["forkserver", "fork"])
def test_a_script_without_a_main_guard_runs_process_workers(tmp_path, method):
    source = GUARDLESS.format(method=method, extra="")
    result = _run(tmp_path, source)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.splitlines() == [
        "mode process 8",
        "mode process 8",
        f"own class process {sum(range(64))}",
    ]


def test_spawn_without_a_main_guard_names_the_guard_and_never_loops(tmp_path):
    """``spawn`` starts a fresh interpreter that re-runs the script: the workers die
    while starting. One clear error names the guard; restart_workers=True does not
    restart them (it used to restart forever)."""
    source = GUARDLESS.format(method="spawn", extra="restart_workers=True")
    result = _run(tmp_path, source)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("stoker.errors.WorkerCrashed"), result.stderr[-4000:]
    assert "while starting" in last
    assert 'if __name__ == "__main__":' in last
    # Each of the 2 workers started once and was not replaced.
    assert result.stderr.count("bootstrapping phase") <= 2, result.stderr[-4000:]


def test_a_guarded_spawn_script_still_works(tmp_path):
    body = GUARDLESS.format(method="spawn", extra="")
    head, _, rest = body.partition("ds = ")
    source = head + 'if __name__ == "__main__":\n' + textwrap.indent("ds = " + rest, "    ")
    result = _run(tmp_path, source)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.splitlines()[0] == "mode process 8"
