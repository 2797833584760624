"""Retries of remote reads: what is retried, how long to wait, when to give up.

Object stores under load answer some requests with HTTP 429 ("slow down") or a 5xx,
reset connections, stall, or end a body early. A :class:`RetryPolicy` says how a read
answered that way is tried again: after an exponential back-off with full jitter (a
random wait between 0 and ``backoff * 2**k``, at most ``max_backoff``), or after the
server's ``Retry-After`` when it sends one, within a budget of ``attempts`` tries and
``total_seconds`` per read. A missing file (404) or a refused one (403) is never
retried. :class:`Attempts` runs that budget for one read; the callers (``remote.py``,
``remote_file.py``) only issue the request and check the length of what came back.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import random
import threading
import time
from dataclasses import dataclass

from .._tally import RemoteTally
from ..errors import ConfigError, RemoteReadError

__all__ = ["Attempts", "RetryPolicy", "Truncated"]

_RETRIED_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_RESETS = frozenset({errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE, errno.ETIMEDOUT})


@dataclass(frozen=True)
class RetryPolicy:
    """How remote reads (fsspec URLs) are retried when the store throttles or fails.

    Retried: HTTP 408, 425, 429 and 5xx answers (the wait is at least the server's
    ``Retry-After``), connection resets and refusals, requests that take longer than
    ``timeout``, and bodies shorter than the object (or the range) asked for. A missing
    file (404), a refused one (403) and any other answer are raised at once.

    Attributes:
        attempts: most tries of one read (the first one included); 1 never retries.
        backoff: the base of the back-off in seconds: before try ``k + 1`` a random
            wait between 0 and ``backoff * 2**(k - 1)`` (full jitter).
        max_backoff: the longest wait drawn between two tries.
        total_seconds: the most time one read may take over all its tries; a wait
            that would go past it ends the read with :class:`~stoker.RemoteReadError`.
        timeout: seconds after which one request counts as failed (and is tried
            again); None (the default) waits as long as the file system does (its
            own timeouts are retried). A request may be a whole file or a Parquet
            column chunk: set it above the longest download you expect. Applies to
            asynchronous file systems (HTTP, S3, GCS, Azure).

    Example:
        >>> import stoker as sk
        >>> policy = sk.RetryPolicy(attempts=12, total_seconds=300.0)
        >>> policy.attempts, policy.backoff
        (12, 0.1)

    Errors:
        ConfigError: a value out of range (attempts < 1, a negative wait).
    """

    attempts: int = 10
    backoff: float = 0.1
    max_backoff: float = 20.0
    total_seconds: float = 120.0
    timeout: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or isinstance(self.attempts, bool):
            raise ConfigError(f"RetryPolicy.attempts must be an int >= 1, got {self.attempts!r}")
        if self.attempts < 1:
            raise ConfigError(f"RetryPolicy.attempts must be an int >= 1, got {self.attempts!r}")
        for name in ("backoff", "max_backoff", "total_seconds"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"RetryPolicy.{name} must be a number >= 0, got {value!r}")
        timeout = self.timeout
        if timeout is not None and (
            not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0
        ):
            raise ConfigError(f"RetryPolicy.timeout must be a number > 0 or None, got {timeout!r}")

    def wait(self, retry: int, rng: random.Random, retry_after: float | None = None) -> float:
        """The seconds to wait before retry number ``retry`` (1 for the first retry).

        Example:
            >>> import random
            >>> RetryPolicy(backoff=0.5).wait(3, random.Random(0)) <= 2.0
            True
            >>> RetryPolicy().wait(1, random.Random(0), retry_after=3.0)
            3.0
        """
        ceiling = min(self.max_backoff, self.backoff * 2.0 ** (retry - 1))
        drawn = rng.uniform(0.0, ceiling)
        return drawn if retry_after is None else max(drawn, retry_after)


class Truncated(OSError):
    """A body shorter than the object or range asked for (read again)."""


def check_policy(retry: object) -> RetryPolicy:
    """``retry`` as a :class:`RetryPolicy` (None: the defaults).

    Errors:
        ConfigError: anything else.
    """
    if retry is None:
        return RetryPolicy()
    if not isinstance(retry, RetryPolicy):
        raise ConfigError(
            f"retry= takes a stoker.RetryPolicy (or None for the defaults), got {retry!r}"
        )
    return retry


def _status(exc: BaseException) -> int | None:
    for name in ("status", "status_code", "code"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    return None


def _retry_after(exc: BaseException) -> float | None:
    """The server's ``Retry-After`` (seconds, or an HTTP date) on an HTTP error."""
    headers = getattr(exc, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def classify(exc: BaseException) -> str | None:
    """Why ``exc`` is worth another try ("throttled", "server", "reset", "timeout",
    "truncated"), or None when it is not (a missing file, a refusal, a bug).

    Example:
        >>> classify(ConnectionResetError()), classify(FileNotFoundError())
        ('reset', None)
    """
    if isinstance(exc, Truncated):
        return "truncated"
    if isinstance(exc, FileNotFoundError | PermissionError):
        return None
    status = _status(exc)
    if status is not None:
        if status not in _RETRIED_STATUS:
            return None
        return "throttled" if status in (429, 503) else "server"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "timeout"
    name = type(exc).__name__
    if "Payload" in name or "ContentLength" in name or "IncompleteRead" in name:
        return "truncated"  # aiohttp / http.client: the body ended before its length
    if isinstance(exc, ConnectionError) or "Disconnect" in name or "Connection" in name:
        return "reset"
    if isinstance(exc, OSError) and exc.errno in _RESETS:
        return "reset"
    return None


def _describe(exc: BaseException) -> str:
    status = _status(exc)
    if status is not None:
        message = getattr(exc, "message", None)
        return f"HTTP {status} {message}" if isinstance(message, str) else f"HTTP {status}"
    detail = str(exc).strip()
    return f"{type(exc).__name__} ({detail[:120]})" if detail else type(exc).__name__


_rng = threading.local()


def _jitter() -> random.Random:
    """This thread's generator for back-off jitter (its own: the global one is the user's)."""
    rng: random.Random | None = getattr(_rng, "rng", None)
    if rng is None:
        rng = _rng.rng = random.Random()
    return rng


class Attempts:
    """The tries of one read of ``url`` under ``policy``; counts go to ``tally``.

    A caller issues a request, hands the bytes to :meth:`done` (which checks their
    length) and any exception to :meth:`failed`, which returns how long to wait
    before the next try or raises: the exception itself when it is not worth
    another try, :class:`~stoker.RemoteReadError` when the budget is spent.

    Example:
        >>> tries = Attempts("memory://a", RetryPolicy(attempts=2, backoff=0.0), RemoteTally())
        >>> tries.failed(ConnectionResetError("reset by peer"))
        0.0
        >>> tries.done(b"abc", 3)
        b'abc'
    """

    def __init__(self, url: str, policy: RetryPolicy, tally: RemoteTally) -> None:
        self.url = url
        self.policy = policy
        self.tally = tally
        self.tries = 0
        self.start = time.monotonic()

    def begin(self) -> None:
        """Count one request about to be sent."""
        self.tries += 1
        self.tally.add(requests=1)

    def done(self, data: bytes, expected: int | None) -> bytes:
        """``data`` when it is as long as ``expected`` (None: unknown).

        Errors:
            Truncated: a shorter body (hand it to :meth:`failed`).
        """
        if expected is not None and len(data) < expected:
            raise Truncated(f"{len(data)} of {expected} bytes arrived")
        self.tally.add(nbytes=len(data))
        return data

    def failed(self, exc: BaseException) -> float:
        """The seconds to wait before trying ``exc``'s read again.

        Errors:
            RemoteReadError: the budget (attempts or seconds) is spent.
            Exception: ``exc`` itself when it is not worth another try.
        """
        kind = classify(exc)
        if kind is None:
            raise exc
        if kind == "truncated":
            self.tally.add(truncated=1)
        policy = self.policy
        elapsed = time.monotonic() - self.start
        wait = policy.wait(self.tries, _jitter(), _retry_after(exc))
        if self.tries >= policy.attempts or elapsed + wait > policy.total_seconds:
            raise RemoteReadError(
                self.url, self.tries, _describe(exc), elapsed, policy.attempts
            ) from exc
        self.tally.add(retries=1, backoff_seconds=wait)
        return wait
