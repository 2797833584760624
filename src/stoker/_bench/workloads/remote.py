"""``remote``: small files read over HTTP from a local server that adds 5 ms per request.

A ``ThreadingHTTPServer`` in a separate process serves 2,000 files of 4 KB (1,000 with
``--quick``) from the cache folder, sleeping 5 ms in its handler before each reply
(HTTP/1.1, so connections are kept alive; a lean handler that reads the file and
writes the reply in one write, Nagle's algorithm off). ``sk.from_files(urls, concurrency=c)``
reads them in order, batch 32, two thread workers: the reads of a batch are issued
together, and at most ``c`` are in flight in the process across both batches being
read, so ``stoker c=4`` can reach at most 4 / 5 ms = 800 files/s and ``stoker c=32``
32 / 5 ms = 6,400 files/s (each row's limit). On 2 shared cores the
Python server itself tops out well below 6,400 requests/s, so the c=4 row is the one
that measures whether latency, and nothing else, bounds the loader. A torch row (a dataset doing one
``urllib`` request per record, 2 worker processes) shows what latency costs without
concurrent reads: at most 2 / 5 ms = 400 files/s.

Needs fsspec and aiohttp (``pip install 'stoker[remote]'``); run it by name.
"""

from __future__ import annotations

import atexit
import hashlib
import http.server
import multiprocessing
import os
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, Target
from . import workload

FILES = 2000
QUICK_FILES = 1000
FILE_BYTES = 4096
LATENCY_S = 0.005
BATCH_SIZE = 32
CONCURRENCY = 4
WIDE = 32


class _SlowHandler(http.server.BaseHTTPRequestHandler):
    """GET /<name>: sleeps 5 ms, then replies with the file ``<name>`` of the folder.

    A lean handler (no MIME guessing, no directory listing, the reply in one write)
    so that the server's own work, which shares the 2 cores with the loader, adds
    as little as it can to the 5 ms.
    """

    protocol_version = "HTTP/1.1"
    # With Nagle's algorithm a reply written in two parts waits for the client's
    # delayed ACK of the first, up to 40 ms on a kept-alive connection.
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        time.sleep(LATENCY_S)
        name = self.path.lstrip("/")
        if self.server.throttles(name):
            self.wfile.write(b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n")
            return
        try:
            if "/" in name or name.startswith("."):
                raise FileNotFoundError(name)
            data = (self.server.directory / name).read_bytes()
        except OSError:
            self.send_error(404)
            return
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        )
        self.wfile.write(head.encode() + data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    """Serves ``directory``; answers a share ``throttle`` of the requests with HTTP 429,
    chosen by a hash of (path, how many times it was asked for before): the same
    requests in every run, whatever the order in which they arrive."""

    request_queue_size = 256  # the default (5) drops connections opened together

    def __init__(self, directory: Path, throttle: float = 0.0) -> None:
        self.directory = directory
        self.throttle = throttle
        self._asked: dict[str, int] = {}
        self._lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _SlowHandler)

    def throttles(self, name: str) -> bool:
        if not self.throttle:
            return False
        with self._lock:
            tries = self._asked.get(name, 0)
            self._asked[name] = tries + 1
        digest = hashlib.sha256(f"{name}|{tries}".encode()).digest()
        return int.from_bytes(digest[:8], "big") < self.throttle * 2.0**64


def _serve(directory: str, port: Any, throttle: float = 0.0) -> None:
    with _Server(Path(directory), throttle) as httpd:
        port.value = httpd.server_address[1]
        httpd.serve_forever()


class Server:
    """The HTTP server process; :meth:`close` (also run at exit) ends it.

    Resources:
        One process, ended by :meth:`close` (idempotent) or at interpreter exit.
    """

    def __init__(self, directory: Path, throttle: float = 0.0) -> None:
        context = multiprocessing.get_context("spawn")
        port = context.Value("i", 0)
        self._process = context.Process(
            target=_serve, args=(str(directory), port, throttle), daemon=True
        )
        self._process.start()
        deadline = time.monotonic() + 30
        while port.value == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        if port.value == 0:
            self.close()
            raise RuntimeError("the benchmark's HTTP server did not start within 30 s")
        self.url = f"http://127.0.0.1:{port.value}"
        atexit.register(self.close)

    def close(self) -> None:
        if self._process.is_alive():
            self._process.terminate()
        self._process.join(5)


def _content(index: int) -> bytes:
    return np.random.Generator(np.random.PCG64([7, index])).bytes(FILE_BYTES)


def _files(cache_dir: Path, count: int) -> Path:
    folder = cache_dir / "remote-4k"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        path = folder / f"{i:06d}.bin"
        if not path.is_file():
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(_content(i))
            os.replace(tmp, path)
    return folder


def reference_batches(n: int) -> Iterator[np.ndarray]:
    """The batches every loader of the remote workloads must give for files ``0 .. n - 1``:
    the first bytes of each file, in order, batch by batch."""
    for start in range(0, n, BATCH_SIZE):
        stop = min(n, start + BATCH_SIZE)
        yield np.stack([_first_bytes(_content(i)) for i in range(start, stop)])


def _first_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data[:8], dtype=np.uint8)


class Heads:
    """Yields each stoker batch as an array of the first 8 bytes of every file."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __iter__(self) -> Any:
        for batch in self._loader:
            yield np.stack([_first_bytes(b) for b in batch["bytes"]])


class UrlRecords:
    """A dataset for torch: record ``i`` is the first 8 bytes of URL ``i``, one request each."""

    def __init__(self, urls: list[str]) -> None:
        self._urls = urls

    def __len__(self) -> int:
        return len(self._urls)

    def __getitem__(self, index: int) -> np.ndarray:
        with urllib.request.urlopen(self._urls[index]) as reply:
            return _first_bytes(reply.read())


@workload(
    "remote",
    "2,000 4 KB files (1,000 with --quick) over HTTP with 5 ms latency per request, "
    "batch 32, 4 or 32 reads in flight",
    default=False,
    requires=(("fsspec", "remote"), ("aiohttp", "remote")),
)
def prepare(ctx: BenchContext) -> Prepared:
    """Start the server, list the URLs; every loader reads the files in order."""
    n = max(1, int((QUICK_FILES if ctx.quick else FILES) * ctx.scale))
    folder = _files(ctx.cache_dir, n)
    server = Server(folder)
    urls = [f"{server.url}/{i:06d}.bin" for i in range(n)]
    runners: list[Runner] = []
    if ctx.wants("stoker"):
        for concurrency in (CONCURRENCY, WIDE):
            dataset = sk.from_files(urls, concurrency=concurrency)

            def stoker_loader(dataset: Any = dataset) -> Any:
                loader = sk.DataLoader(
                    dataset, batch_size=BATCH_SIZE, num_workers=2, worker_mode="thread"
                )
                return Heads(loader)

            runners.append(
                Runner(
                    f"stoker c={concurrency}",
                    "stoker",
                    stoker_loader,
                    limit=concurrency / LATENCY_S,
                )
            )
    if ctx.wants("torch"):
        torch, records = ctx.torch, UrlRecords(urls)

        def torch_loader() -> Any:
            return torch.utils.data.DataLoader(records, batch_size=BATCH_SIZE, num_workers=2)

        runners.append(Runner("torch x2", "torch", torch_loader, limit=2 / LATENCY_S))

    return Prepared(
        summary=(
            f"{n:,} 4 KB files over HTTP with 5 ms latency per request, batch 32, "
            "4 or 32 reads in flight"
        ),
        samples=n,
        record_bytes=FILE_BYTES,
        runners=tuple(runners),
        reference=lambda: reference_batches(n),
        params={
            "records": n,
            "file_bytes": FILE_BYTES,
            "latency_s": LATENCY_S,
            "batch_size": BATCH_SIZE,
            "concurrency": CONCURRENCY,
            "server": "http.server.ThreadingHTTPServer, HTTP/1.1, separate process",
        },
        targets=(Target(f"stoker c={CONCURRENCY}", "of_limit", 0.8),),
    )
