"""``RayExecutor``: jobs run on ``num_workers`` Ray actors (``worker_mode="ray"``).

The parent still plans every job and owns the state; an actor only builds what a
job names, exactly as a thread or a process worker does (it runs the same
:class:`~stoker._exec.jobs.Runtime`). So batches and states are the same as in
every other mode, and a state saved under Ray resumes inline and the reverse.

* **The cluster.** If Ray is initialised in this process, its cluster is used.
  Otherwise ``ray.init()`` is called (it connects to ``RAY_ADDRESS`` or starts a
  local instance) and ``ray.shutdown()`` runs when the last executor using that
  instance closes. A cluster stoker did not start is never shut down.
* **The pipeline** (the :class:`~stoker._exec.jobs.WorkerSpec`) is put in the object
  store once; every actor gets its reference and reads it when it starts (NumPy
  arrays in it are shared, not copied, between the actors of one node).
* **Batches** come back through the object store: the NumPy arrays of a batch are
  zero-copy, read-only views of Ray's object store, freed by Ray when nothing
  refers to them any more (so no buffer is recycled under a batch you hold).
* **Dispatch.** The parent queue (:class:`~stoker._exec.queue.QueuedExecutor`) gives
  each actor up to two jobs at a time (one running, one waiting in the actor, which
  hides a call's round trip); a stream part's jobs go to the actor that owns it.
* **Failures.** An exception in a job travels as data, like a process worker's, and
  is re-raised as its own type with the sample index and the actor's traceback as
  notes. An actor that dies (killed, out of memory, its node lost) fails its jobs
  with :class:`~stoker.WorkerCrashed` naming them, or, under
  ``restart_workers=True``, is replaced and its jobs are sent again.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from ..errors import ConfigError, IteratorFailed, WorkerCrashed, WorkerError
from .executor import cancel_future
from .jobs import Done, Job, Runtime, WorkerSpec
from .processes import DEFAULT_MAX_RESTARTS
from .queue import CLOSED_WHILE_BUILDING, QueuedExecutor
from .worker import PackedError, pack_error

__all__ = ["PER_ACTOR", "RayExecutor"]

PER_ACTOR = 2
"""Jobs an actor holds at once: the one it runs and the next, waiting in the actor."""
_JOIN_SECONDS = 5.0
_STACK_SECONDS = 1.0
"""How long the watchdog's report waits for a busy actor's stack."""


def _ray() -> Any:
    """The ``ray`` module, or :class:`~stoker.ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            "worker_mode='ray' needs Ray: pip install 'stoker[ray]' (or pip install ray)"
        ) from exc
    return ray


class _Cluster:
    """The Ray instance this module started, if any, and how many executors use it.

    Only an instance started here is ever shut down, when the last executor that
    used it closes; one that was initialised by the caller is left as it is.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._started = False

    def join(self) -> bool:
        """Make sure Ray is initialised; True when this executor must :meth:`leave`."""
        ray = _ray()
        with self._lock:
            if not ray.is_initialized():
                ray.init()
                self._started, self._users = True, 0
            if not self._started:
                return False
            self._users += 1
            return True

    def leave(self) -> None:
        """One user fewer; shut down the instance started here after its last user."""
        ray = _ray()
        with self._lock:
            self._users -= 1
            if self._users > 0 or not self._started:
                return
            self._started = False
            if ray.is_initialized():
                ray.shutdown()


_cluster = _Cluster()


class _Actor:
    """One worker, living in a Ray actor process (made remote by :func:`_actor_class`)."""

    def __init__(self, refs: list[Any], worker_id: int) -> None:
        self._init_error: PackedError | None = None
        self._runtime: Runtime | None = None
        try:
            # The reference travels inside a list so that Ray does not resolve it
            # before this method runs: a pipeline that fails to load is reported here.
            spec: WorkerSpec = _ray().get(refs[0])
            runtime = Runtime(spec, worker_id, "ray", pool=None)
            runtime.start()
            self._runtime = runtime
        except Exception as exc:
            exc.add_note(f"stoker: raised while starting Ray worker {worker_id}")
            if "No module named" in str(exc):
                exc.add_note(
                    "stoker: Ray workers import the modules that hold the pipeline's "
                    "functions and classes: make them importable on every node (install "
                    "them, or pass runtime_env={'py_modules': [...]} or {'working_dir': ...} "
                    "to ray.init(), or ray_options={'runtime_env': ...})"
                )
            self._init_error = pack_error(exc)

    def run(self, job: Job) -> tuple[str, Any]:
        """``("done", Done)``, ``("error", packed)`` or ``("init_error", packed)``."""
        from .._worker_info import set_worker_info
        from .worker import _portable

        runtime = self._runtime
        if runtime is None:
            return "init_error", self._init_error
        set_worker_info(runtime.info)  # the thread Ray runs this call on
        try:
            done = runtime.run(job)
        except Exception as exc:
            return "error", pack_error(exc)
        done.skipped = [(i, s, _portable(e)) for i, s, e in done.skipped]
        return "done", done

    def stacks(self) -> str:
        """The Python stack of every other thread of the actor (the watchdog asks for it
        while :meth:`run` is stuck: this method runs in a concurrency group of its own)."""
        import sys
        import threading
        import traceback

        me = threading.get_ident()
        names = {t.ident: t.name for t in threading.enumerate()}
        return "".join(
            f"thread {names.get(ident, ident)}:\n" + "".join(traceback.format_stack(frame))
            for ident, frame in sys._current_frames().items()
            if ident != me
        )


_remote_class: Any = None


def _actor_class() -> Any:
    """:class:`_Actor` as a Ray actor class (made once, when Ray is first used)."""
    global _remote_class
    if _remote_class is None:
        ray = _ray()
        # Jobs run one at a time in the default group; the watchdog's stack request
        # has a thread of its own, so it is answered while a job is stuck.
        inspectable = type(
            "StokerRayWorker",
            (_Actor,),
            {"stacks": ray.method(concurrency_group="inspect")(_Actor.stacks)},
        )
        _remote_class = ray.remote(concurrency_groups={"inspect": 1})(inspectable)
    return _remote_class


class _Member:
    """One actor of the executor and the jobs it holds (guarded by the executor's lock)."""

    __slots__ = ("dead", "handle", "held", "id")

    def __init__(self, worker_id: int, handle: Any) -> None:
        self.id = worker_id
        self.handle = handle
        self.held: list[tuple[Job, Future[Done]]] = []
        self.dead = False


class RayExecutor(QueuedExecutor):
    """``spec.num_workers`` Ray actors running jobs of one loader.

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> spec = WorkerSpec(sk.range(10), None, 2, "raise", 0, 1, None, None)
        >>> with RayExecutor(spec, options={"num_cpus": 0}) as ex:  # doctest: +SKIP
        ...     job = Job(0, "build", ((Context(), np.array([7, 8])),), "batch 0")
        ...     ex.submit(job).result(timeout=60).value.tolist()
        [7, 8]

    Args:
        spec: the pipeline and settings every worker gets.
        options: passed to ``.options(...)`` of every actor (``num_cpus``,
            ``memory``, ``resources``, ``label_selector``, ``scheduling_strategy``).
        restart: replace an actor that died and send its jobs again.
        max_restarts: replacements over the executor's life before it raises.

    Resources:
        Owns its actors, a results thread (``stoker-ray-results``) and, when it had to
        start one, a share of a local Ray instance. :meth:`close` (idempotent) fails
        the jobs in flight, kills the actors, ends the thread and shuts the Ray
        instance down if this module started it and no other executor uses it.

    Errors:
        :class:`~stoker.ConfigError` when Ray is not installed or the pipeline cannot
        be sent. A job's exception reaches its future as its own type when it can be
        rebuilt here (else :class:`~stoker.WorkerError`), with the actor's traceback
        as a note; :class:`~stoker.WorkerCrashed` when an actor dies.
    """

    mode = "ray"

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        options: Mapping[str, Any] | None = None,
        restart: bool = False,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
    ) -> None:
        super().__init__(spec.num_workers)
        ray = _ray()
        self._restart = restart
        self._restarts_left = max_restarts
        self._max_restarts = max_restarts
        self._options = dict(options or {})
        self._members: list[_Member] = []
        self._results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._owns_cluster = _cluster.join()
        self._reader: threading.Thread | None = None
        try:
            self._spec_ref = _put(ray, spec)
            self._members = [_Member(i, self._start_actor(i)) for i in range(spec.num_workers)]
        except BaseException:
            self.close()
            raise
        self._reader = threading.Thread(target=self._read, name="stoker-ray-results", daemon=True)
        self._reader.start()

    @property
    def actors(self) -> list[Any]:
        """The actor handles, by worker id (a replaced actor's successor in its place)."""
        with self._cond:
            return [m.handle for m in self._members]

    def _start_actor(self, worker_id: int) -> Any:
        actor = _actor_class()
        if self._options:
            actor = actor.options(**self._options)
        return actor.remote([self._spec_ref], worker_id)

    # -- the parent's side of the queue ---------------------------------------------

    def _queued(self, job: Job) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        """Give queued jobs to actors with room, round by round (lock held)."""
        for room in range(PER_ACTOR):
            for member in self._members:
                while len(member.held) <= room and not member.dead:
                    taken = self._next_for(member.id)
                    if taken is None:
                        break
                    job, future = taken
                    if future.done():  # finished by an actor that died after sending it
                        continue
                    member.held.append((job, future))
                    ref = member.handle.run.remote(job.for_worker())
                    ref.future().add_done_callback(
                        lambda result, m=member, j=job, f=future: self._results.put(
                            (m, j, f, result)
                        )
                    )

    # -- the results thread ---------------------------------------------------------

    def _read(self) -> None:
        """Resolve the futures of finished calls (Ray's callbacks only queue them)."""
        ray = _ray()
        while True:
            item = self._results.get()
            if item is None:
                return
            member, job, future, result = item
            try:
                tag, payload = result.result()
            except ray.exceptions.RayActorError as exc:
                self._died(member, exc)
                continue
            except Exception as exc:  # the call failed in Ray (a result it cannot send)
                tag, payload = "lost", exc
            with self._cond:
                with contextlib.suppress(ValueError):
                    member.held.remove((job, future))
                if self._closed:
                    continue
            if tag == "done":
                _resolve(future, payload)
            elif tag == "init_error":
                failed = _rebuild(payload, member.id, None)
                self._break(failed)
                _fail(future, failed)
            elif tag == "error":
                _fail(future, _rebuild(payload, member.id, job))
            else:
                error = WorkerError(
                    f"the batch of {job.where} could not come back from Ray worker "
                    f"{member.id}: {payload}",
                    batch_index=_batch(job),
                )
                error.__cause__ = payload
                _fail(future, error)
            del future, result, item
            with self._cond:
                if not self._closed:
                    self._dispatch()

    def _died(self, member: _Member, exc: BaseException) -> None:
        """``member``'s actor is gone: replace it and re-issue its jobs, or fail them."""
        with self._cond:
            if self._closed or member.dead:
                return
            member.dead = True
            held, member.held = member.held, []
            index = self._members.index(member)
            if self._restart and self.broken is None and self._restarts_left > 0:
                self._restarts_left -= 1
                _kill(member.handle)
                self._members[index] = _Member(member.id, self._start_actor(member.id))
                for pair in reversed(held):
                    self._pending.appendleft(pair)
                self._dispatch()
                return
            jobs = [job for job, _ in held]
            named = ", ".join(job.where for job in jobs) if jobs else "no job"
            crash = WorkerCrashed(
                f"Ray worker {member.id} died while it held {named}: "
                f"{type(exc).__name__}: {_first_line(exc)}" + self._restart_advice(),
                batch_index=_batch(jobs[0]) if jobs else None,
            )
            crash.__cause__ = exc
        for _, future in held:
            _fail(future, crash)
        self._break(crash)

    def _restart_advice(self) -> str:
        if not self._restart:
            return (
                "; pass restart_workers=True to replace dead actors and re-issue their jobs, "
                "or look for what ends them (memory: ray_options={'memory': ...}, a node "
                "that left the cluster, a record that crashes a C extension)"
            )
        return (
            f"; actors were already replaced max_restarts={self._max_restarts} times: look "
            "for what ends them (memory, a lost node, a record that crashes them), or "
            "raise max_restarts="
        )

    def stacks(self) -> str:
        """The jobs each actor holds and its threads' stacks (for the watchdog's report);
        an actor that does not answer within a second is named without its stack."""
        with self._cond:
            busy = [(m, [job.where for job, _ in m.held]) for m in self._members if m.held]
        if not busy:
            return "(no Ray worker holds a job)"
        asked = [(m, jobs, m.handle.stacks.remote()) for m, jobs in busy]
        lines = []
        for member, jobs, ref in asked:
            lines.append(f"Ray worker {member.id}: {', '.join(jobs)}")
            try:
                lines.append(_ray().get(ref, timeout=_STACK_SECONDS))
            except Exception as exc:  # the actor died or is busy in C code holding the GIL
                lines.append(
                    f"    (its stack did not arrive: {type(exc).__name__}; `ray stack` on "
                    "its node prints it)"
                )
        return "\n".join(lines)

    # -- ending ---------------------------------------------------------------------

    def close(self) -> None:
        """Fail the jobs in flight, kill the actors, end the results thread (idempotent)."""
        if self.foreign:
            return
        with self._cond:
            if self._closed:
                return
            queued = self._take_all()
            held = [pair for m in self._members for pair in m.held]
            members, self._members = self._members, []
            for member in members:
                member.held = []
                member.dead = True
        for _, future in queued:
            cancel_future(future)  # wakes wait() as well as result()
        for _, future in held:
            _fail(future, IteratorFailed(CLOSED_WHILE_BUILDING))
        self._results.put(None)
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(_JOIN_SECONDS)
        ray = _ray()
        if ray.is_initialized():
            for member in members:
                _kill(member.handle)
        self._spec_ref = None
        if self._owns_cluster:
            self._owns_cluster = False
            _cluster.leave()


def _put(ray: Any, spec: WorkerSpec) -> Any:
    """``spec`` in the object store, or :class:`~stoker.ConfigError` naming what failed."""
    try:
        return ray.put(spec)
    except Exception as exc:
        from .pickling import dumps_for_workers

        dumps_for_workers(spec)  # raises NotPicklable naming the part, if it finds one
        raise ConfigError(
            f"the pipeline cannot be sent to Ray workers: {type(exc).__name__}: {exc}"
        ) from exc


def _kill(handle: Any) -> None:
    with contextlib.suppress(Exception):  # already gone, or its cluster is
        _ray().kill(handle, no_restart=True)


def _batch(job: Job) -> int | None:
    return job.batch_index


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _resolve(future: Future[Done], done: Done) -> None:
    if not future.done():
        future.set_result(done)


def _fail(future: Future[Done], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _rebuild(packed: PackedError, worker_id: int, job: Job | None) -> BaseException:
    """A job's exception as the parent raises it: its own type if it can be rebuilt."""
    data, summary, text, sample = packed
    batch = _batch(job) if job is not None else None
    exc: BaseException | None = None
    if data is not None:
        try:
            exc = pickle.loads(data)
        except Exception:
            exc = None
    if exc is None:
        exc = WorkerError(summary, sample_index=sample, batch_index=batch)
    exc.add_note(f"stoker: raised in Ray worker {worker_id}; its traceback:\n{text}")
    with contextlib.suppress(AttributeError):
        exc.worker_traceback = text  # type: ignore[attr-defined]
        exc.batch_index = batch  # type: ignore[attr-defined]
    return exc
