"""``EagerExecutor``: each job runs as it is submitted, on the submitting thread.

The adapters' read-ahead (``stoker._ahead``) keeps its batches in flight in a job
window like every loader does. Its jobs are its own (pull the next batch from a
source, start its copy to a device) and must run on the caller's thread, as soon
as the window plans them: a device copy is started where the training step's
stream is current, and the window planning ``depth`` jobs ahead is what holds
``depth`` copies in flight while the step runs. This executor does just that.
"""

from __future__ import annotations

from concurrent.futures import Future

from .executor import cancel_future
from .jobs import Done, Job

__all__ = ["EagerExecutor"]


class EagerExecutor:
    """Runs a job's ``read`` when it is submitted; the future is done on return.

    An ``Exception`` is set on the future (the window raises it when that job's
    turn comes, after the jobs submitted before it); ``KeyboardInterrupt`` and the
    other ``BaseException`` s propagate from :meth:`submit` at once.

    Example:
        >>> from stoker._epoch.jobs import Job
        >>> ex = EagerExecutor()
        >>> job = Job(0, "local", (), "batch 0", read=lambda: Done(42))
        >>> ex.submit(job).result().value
        42
        >>> ex.close()

    Resources:
        Owns no thread or process.

    Errors:
        A job without ``read`` fails with ``TypeError``; after :meth:`close`,
        submitted jobs are cancelled unrun.
    """

    mode = "eager"
    num_workers = 1
    broken: BaseException | None = None

    def __init__(self) -> None:
        self.closed = False

    def submit(self, job: Job) -> Future[Done]:
        """Run ``job`` now; a future holding its result or its exception."""
        future: Future[Done] = Future()
        if self.closed:
            cancel_future(future)
            return future
        if job.read is None:
            raise TypeError(f"an eager job reads in this process: {job.where} has no read")
        future.set_running_or_notify_cancel()
        try:
            done = job.read()
        except Exception as exc:
            future.set_exception(exc)
            del exc  # the traceback keeps this frame: no cycle through the exception
        else:
            future.set_result(done)
        return future

    def cancel(self, token: int) -> None:
        """Nothing waits to run: every job ran when it was submitted."""

    def close(self) -> None:
        """Refuse later jobs (idempotent)."""
        self.closed = True

    def __enter__(self) -> EagerExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
