"""A real HTTP server on 127.0.0.1 for the tests of remote reads.

``serve(folder)`` serves a folder's files (with ``Range`` requests, as object stores
answer them). ``serve(folder, faults=Faults(...))`` also answers some requests the way
a store under load does: HTTP 429 (with or without ``Retry-After``), 503, a delay, a
reset connection, a body cut short. Which request gets which answer is decided from a
seeded hash of the request (method, path, range) and how many times that same request
came before, so a run does not depend on how the client's threads were scheduled;
from try ``faulty_tries`` of a request on it is always answered in full (the faults
are bounded). Every request is logged (``faults.log``).
"""

import contextlib
import functools
import hashlib
import http.server
import os
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

FAULTS = ("throttle", "throttle_after", "unavailable", "delay", "stall", "reset", "truncate")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder's files and logs nothing."""

    def log_message(self, format, *args):
        pass


@dataclass
class Faults:
    """What the server does to the requests for files, by share of first tries.

    ``rates`` maps a fault (one of ``FAULTS``) to the share of requests that get it;
    ``stall`` holds a request ``stall_seconds`` (longer than the client's timeout),
    ``delay`` holds it ``delay_seconds`` then answers in full. ``latency`` is added to
    every request for a file (a store's round trip).
    """

    seed: int = 0
    rates: dict = field(default_factory=dict)
    faulty_tries: int = 3
    delay_seconds: float = 0.02
    stall_seconds: float = 0.5
    retry_after: str = "0.01"
    latency: float = 0.0
    always: frozenset = frozenset()  # paths answered 503 on every try
    log: list = field(default_factory=list)
    _tries: Counter = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, method, path, ranged):
        """The fault for this request (None: answer in full); logs the request."""
        key = f"{method} {path} {ranged}"
        with self._lock:
            attempt = self._tries[key]
            self._tries[key] += 1
        fault = None
        if path in self.always:
            fault = "unavailable"
        elif attempt < self.faulty_tries and not path.endswith("/"):
            digest = hashlib.sha256(f"{self.seed}|{key}|{attempt}".encode()).digest()
            draw = int.from_bytes(digest[:8], "big") / 2.0**64
            for name in FAULTS:
                share = self.rates.get(name, 0.0)
                if draw < share:
                    fault = name
                    break
                draw -= share
        with self._lock:
            self.log.append((method, path, ranged, fault))
        return fault

    def reset(self, **changes):
        """Forget the requests seen (tries start again at 0); set any field given."""
        with self._lock:
            self._tries.clear()
            self.log.clear()
        for name, value in changes.items():
            setattr(self, name, value)

    def count(self, fault=None, method=None):
        """How many logged requests got ``fault`` (any, with None) by ``method``."""
        with self._lock:
            return sum(
                1
                for m, _, _, f in self.log
                if (fault is None or f == fault) and (method is None or m == method)
            )


def _reset(connection):
    """Close ``connection`` with a TCP reset (SO_LINGER 0)."""
    with contextlib.suppress(OSError):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()


class RangeHandler(QuietHandler):
    """Serves files with ``Range`` support, and injects the server's ``faults``."""

    faults = None

    def __init__(self, *args, faults=None, **kwargs):
        self.faults = faults
        super().__init__(*args, **kwargs)

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _serve(self, head):
        path = self.translate_path(self.path)
        ranged = self.headers.get("Range")
        faults = self.faults
        fault = None
        if faults is not None:
            fault = faults.decide(self.command, self.path, ranged)
            if faults.latency and not os.path.isdir(path):
                time.sleep(faults.latency)
        if fault in ("throttle", "throttle_after", "unavailable"):
            self.send_response(503 if fault == "unavailable" else 429)
            if fault == "throttle_after":
                self.send_header("Retry-After", faults.retry_after)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "reset":
            self.close_connection = True
            _reset(self.connection)
            return
        if fault in ("delay", "stall"):
            time.sleep(faults.delay_seconds if fault == "delay" else faults.stall_seconds)
        if os.path.isdir(path) or not os.path.isfile(path):
            return super().do_HEAD() if head else super().do_GET()
        with open(path, "rb") as f:
            data = f.read()
        status, body = 200, data
        if ranged and ranged.startswith("bytes="):
            lo, _, hi = ranged[6:].partition("-")
            start = int(lo)
            end = min(len(data), int(hi) + 1) if hi else len(data)
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status, body = 206, data[start:end]
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.end_headers()
        if head:
            return
        try:
            if fault == "truncate":
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                _reset(self.connection)
                return
            self.wfile.write(body)
        except OSError:
            self.close_connection = True  # the client gave up (a timeout): nothing to do

    def finish(self):
        with contextlib.suppress(OSError, ValueError):
            super().finish()


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 256  # many requests at once, as a loader with concurrency= sends
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a reset injected on purpose, or a client that gave up


@contextlib.contextmanager
def serve(directory, handler=QuietHandler, faults=None):
    """Serve ``directory`` on a free port; yields the base URL.

    With ``faults`` (a :class:`Faults`), ``RangeHandler`` serves it and injects them.
    The server and its thread end when the block does.
    """
    if faults is not None:
        bound = functools.partial(RangeHandler, directory=str(directory), faults=faults)
    else:
        bound = functools.partial(handler, directory=str(directory))
    httpd = _Server(("127.0.0.1", 0), bound)
    thread = threading.Thread(target=httpd.serve_forever, name="test-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
