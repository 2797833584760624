import io
import threading
import uuid

import numpy as np
import pytest
from PIL import Image

import stoker as sk
from http_helpers import QuietHandler, serve
from stoker.testing import assert_resumes_exactly, assert_same_batches

fsspec = pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")


@pytest.fixture
def server(tmp_path):
    """A real HTTP server on 127.0.0.1 serving tmp_path; ended by the fixture."""
    with serve(tmp_path) as url:
        yield url, tmp_path


def _png(seed):
    buf = io.BytesIO()
    pixels = np.random.default_rng(seed).integers(0, 256, (12, 16, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def test_http_list_of_urls(server):
    url, root = server
    for i in range(7):
        (root / f"{i}.bin").write_bytes(bytes([i]) * (i + 1))
    urls = [f"{url}/{i}.bin" for i in range(7)]
    ds = sk.from_files(urls)
    assert len(ds) == 7
    assert ds[3] == {"path": urls[3], "bytes": b"\x03" * 4}
    batch = next(iter(sk.DataLoader(ds, batch_size=7)))
    assert batch["bytes"] == [bytes([i]) * (i + 1) for i in range(7)]


def test_http_missing_file_names_the_url_and_globs_are_refused(server):
    url, root = server
    (root / "a.bin").write_bytes(b"a")
    ds = sk.from_files([f"{url}/a.bin", f"{url}/gone.bin"])
    with pytest.raises(FileNotFoundError, match=r"gone\.bin"):
        list(sk.DataLoader(ds, batch_size=2))
    with pytest.raises(sk.ConfigError, match="cannot glob over HTTP"):
        sk.from_files(f"{url}/*.bin")


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_http_same_batches_in_every_worker_mode_and_resume(server, mode):
    url, root = server
    for i in range(10):
        (root / f"{i:02d}.bin").write_bytes(f"record {i}".encode())
    ds = sk.from_files([f"{url}/{i:02d}.bin" for i in range(10)])
    base = sk.DataLoader(ds, batch_size=3, shuffle=True, seed=1)
    other = sk.DataLoader(ds, batch_size=3, shuffle=True, seed=1, num_workers=2, worker_mode=mode)
    assert_same_batches(base, other, epochs=2)
    if mode == "thread":
        assert_resumes_exactly(base, epochs=2, max_stops=5)


class _Counting(QuietHandler):
    """Sleeps 50 ms per reply and records the most requests it was serving at once.

    A request counts while it sleeps, and stops counting before its reply is written:
    the client frees a slot only once it has the reply, so a new request can never
    overlap the end of the one whose slot it took (a race on a busy machine)."""

    lock = threading.Lock()
    active = 0
    peak = 0

    def do_GET(self):
        cls = type(self)
        with cls.lock:
            cls.active += 1
            cls.peak = max(cls.peak, cls.active)
        try:
            threading.Event().wait(0.05)
        finally:
            with cls.lock:
                cls.active -= 1
        super().do_GET()


def test_http_concurrency_bounds_the_reads_of_all_batches_together(tmp_path):
    with serve(tmp_path, _Counting) as url:
        for i in range(16):
            (tmp_path / f"{i:02d}.bin").write_bytes(bytes([i]))
        ds = sk.from_files([f"{url}/{i:02d}.bin" for i in range(16)], concurrency=3)
        # Two thread workers read two batches of 8 at once: 3 requests in flight in all.
        loader = sk.DataLoader(ds, batch_size=8, num_workers=2, worker_mode="thread")
        batches = [b["bytes"] for b in loader]
        assert batches == [[bytes([i]) for i in range(k, k + 8)] for k in (0, 8)]
        assert _Counting.peak == 3


def test_http_image_folder_from_html_index(server):
    url, root = server
    for cls, n in (("cat", 2), ("dog", 3)):
        (root / "imgs" / cls).mkdir(parents=True)
        for i in range(n):
            (root / "imgs" / cls / f"{i}.png").write_bytes(_png(i))
    ds = sk.from_image_folder(f"{url}/imgs/")
    assert ds.classes == ["cat", "dog"]
    assert ds.labels.tolist() == [0, 0, 1, 1, 1]
    batch = next(iter(sk.DataLoader(sk.vision.eval_transform(8).apply(ds), batch_size=5)))
    assert batch["image"].shape == (5, 3, 8, 8)


@pytest.fixture
def memfs():
    fs = fsspec.filesystem("memory")
    base = f"/stoker-{uuid.uuid4().hex}"
    yield fs, base
    fs.rm(base, recursive=True)


def test_memory_glob_folder_and_image_folder(memfs):
    fs, base = memfs
    for i in range(5):
        fs.pipe(f"{base}/files/sub/{i}.txt", f"t{i}".encode())
    fs.pipe(f"{base}/files/other.bin", b"x")
    ds = sk.from_files(f"memory://{base}/files/**/*.txt")
    assert [r["bytes"] for r in ds] == [b"t0", b"t1", b"t2", b"t3", b"t4"]
    assert len(sk.from_files(f"memory://{base}/files")) == 6
    with pytest.raises(sk.ConfigError, match="matches no file"):
        sk.from_files(f"memory://{base}/files/*.png")
    with pytest.raises(sk.ConfigError, match="no such file"):
        sk.from_files(f"memory://{base}/nothing.txt")
    for cls in ("b", "a"):
        for i in range(2):
            fs.pipe(f"{base}/imgs/{cls}/{i}.png", _png(i))
    folder = sk.from_image_folder(f"memory://{base}/imgs")
    assert folder.classes == ["a", "b"]
    assert folder.labels.tolist() == [0, 0, 1, 1]
    assert folder[3]["image"] == _png(1)


def test_memory_file_deleted_after_listing(memfs):
    fs, base = memfs
    fs.pipe(f"{base}/a.txt", b"a")
    fs.pipe(f"{base}/b.txt", b"b")
    ds = sk.from_files(f"memory://{base}/*.txt")
    fs.rm(f"{base}/b.txt")
    with pytest.raises(FileNotFoundError, match=r"b\.txt"):
        ds[1]


def test_mixed_file_systems_are_refused(memfs, tmp_path):
    fs, base = memfs
    fs.pipe(f"{base}/a.txt", b"a")
    with pytest.raises(sk.ConfigError, match="one file system"):
        sk.from_files([f"memory://{base}/a.txt", str(tmp_path)])
