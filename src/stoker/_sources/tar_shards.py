"""``from_tar_shards``: a stream of samples from tar shards in the WebDataset layout.

A shard is a tar file whose members are grouped into samples by key: the member
name up to the first dot of its last component is the key, the rest is the field
(``"a/0001.jpg"`` and ``"a/0001.cls"`` make ``{"__key__": "a/0001", "__url__": shard,
"jpg": b"...", "cls": b"..."}``). Consecutive members with one key make one sample.
Fields are bytes; decoding is left to ``map``.

The stream is split by shard: with ``P`` readers (workers times hosts), reader ``p``
reads the shards at positions ``p, p + P, ...`` of the epoch's shard order. A reader's
state lists the shards it still has to read, each with the samples already taken
from it (``{"todo": [[position, taken], ...]}``), so the states of all readers can be
dealt anew to another number of readers: the stream is *elastic* (see ``_elastic.py``).
"""

from __future__ import annotations

import functools
import os
import tarfile
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, Self

from .._context import Context
from .._hosts import Shard
from .._iterdataset import Cursor, StreamNode, parent_state
from .._rng import epoch_rng
from ..errors import ConfigError, StateError, TarShardError
from .remote import DEFAULT_CONCURRENCY, Remote, is_url
from .retry import RetryPolicy, check_policy
from .shard_paths import list_shards, open_shard

__all__ = ["TarShardError", "TarShards", "from_tar_shards", "read_samples"]

State = dict[str, Any]
Sample = dict[str, Any]

_SALT = 0x5441_5253  # keeps shard orders apart from other per-epoch draws
_NOWHERE = os.path.join(os.sep, "stoker-tar-member-check")  # never created: a name check only


_USTAR = b"ustar\x00"  # POSIX magic: the prefix field extends the name


def _plain_header(buf: bytes | bytearray) -> tuple[str, int] | None:
    """(name, size) of a plain ustar header of a regular file; None for any other block
    (tarfile's own parser then reads it: pax and GNU extensions, links, damage)."""
    if len(buf) != tarfile.BLOCKSIZE or buf[156:157] not in (b"0", b"\x00"):
        return None
    size_field = buf[124:136]
    if size_field[:1] in (b"\x80", b"\xff"):  # base-256: a huge member
        return None
    try:
        size = int(size_field.strip(b" \x00") or b"0", 8)
        chksum = int(buf[148:156].strip(b" \x00"), 8)
    except ValueError:
        return None
    if chksum != sum(buf[:148]) + 256 + sum(buf[156:]):
        return None
    name = buf[:100].split(b"\x00", 1)[0]
    if buf[257:263] == _USTAR and buf[345] != 0:
        name = buf[345:500].split(b"\x00", 1)[0] + b"/" + name
    if not name or name.endswith(b"/"):
        return None
    return name.decode("utf-8", "surrogateescape"), size


class _Header(tarfile.TarInfo):
    """Notes on the archive why the header loop ended (a clean end, or damage), and
    reads the headers of plain regular files quickly (only their name and size)."""

    @classmethod
    def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> Self:
        plain = _plain_header(buf)
        if plain is None:
            return super().frombuf(buf, encoding, errors)
        member = cls(plain[0])
        member.size = plain[1]
        member.type = tarfile.REGTYPE
        return member

    @classmethod
    def fromtarfile(cls, tarfile: tarfile.TarFile) -> Self:
        try:
            return super().fromtarfile(tarfile)
        except Exception as exc:
            # A block of zeros (EOFHeaderError) is the clean end; anything else is damage.
            tarfile.stoker_clean_end = type(exc).__name__ == "EOFHeaderError"  # type: ignore[attr-defined]
            raise


def _members(fileobj: IO[bytes], where: str) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """(name, read) of every regular file in the archive, refusing unsafe members.

    ``read()`` returns the member's bytes; call it before asking for the next member
    (the archive is read as a stream), or not at all to skip the data.
    """
    try:
        archive = tarfile.open(fileobj=fileobj, mode="r|*", tarinfo=_Header)  # noqa: SIM115 (closed by the with below)
    except tarfile.TarError as exc:
        raise TarShardError(f"{where} is not a readable tar file ({exc})") from exc
    with archive:
        count = 0
        while True:
            try:
                member = archive.next()
            except (tarfile.TarError, EOFError, OSError) as exc:
                raise TarShardError(
                    f"{where} is truncated or corrupt after {count} members ({exc}); "
                    "re-create or re-download it"
                ) from exc
            if member is None:
                if not getattr(archive, "stoker_clean_end", False):
                    raise TarShardError(
                        f"{where} ends after {count} members without the end-of-archive "
                        "marker: it is truncated or damaged; re-create or re-download it"
                    )
                return
            count += 1
            archive.members = []  # type: ignore[attr-defined]  # keep memory flat: no index needed
            if member.isdir():
                continue
            try:
                if member.name.startswith(("/", os.sep)):  # the filter would strip it
                    raise tarfile.AbsolutePathError(member)
                if not _plainly_safe(member):
                    tarfile.data_filter(member, _NOWHERE)
            except tarfile.FilterError as exc:
                raise TarShardError(
                    f"member {member.name!r} of {where} is unsafe ({exc}); stoker refuses "
                    "shards whose members leave the archive: re-create the shard with "
                    "relative paths and regular files"
                ) from exc
            if not member.isfile():
                raise TarShardError(
                    f"member {member.name!r} of {where} is a link or a special file; a tar "
                    "shard holds regular files (re-create it without links, e.g. tar "
                    "--dereference --hard-dereference)"
                )
            yield member.name, functools.partial(_read, archive, member, where)


def _plainly_safe(member: tarfile.TarInfo) -> bool:
    """True for a regular file with a relative name and no ``..``: the ``data`` filter
    cannot refuse it, so the (costly) call is saved for every other member."""
    name = member.name
    return member.isreg() and ".." not in name.split("/") and not name.startswith("/")


def _read(archive: tarfile.TarFile, member: tarfile.TarInfo, where: str) -> bytes:
    # The archive is read as a stream and positioned at the member's data: read it
    # straight from the stream (extractfile adds two wrappers for the same bytes).
    stream = archive.fileobj
    try:
        data: bytes = stream.read(member.size) if stream is not None else b""
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise TarShardError(
            f"member {member.name!r} of {where} is truncated ({exc}); re-create or "
            "re-download the shard"
        ) from exc
    if len(data) != member.size:
        raise TarShardError(
            f"member {member.name!r} of {where} is truncated ({len(data)} of "
            f"{member.size} bytes); re-create or re-download the shard"
        )
    return data


def _split_name(name: str) -> tuple[str, str] | None:
    """(key, field) of a member name; None for names without a field (skipped)."""
    slash = name.rfind("/") + 1
    dot = name.find(".", slash)
    if dot <= slash:  # no dot, or a dot file: not part of a sample
        return None
    return name[:dot], name[dot + 1 :]


def read_samples(url: str, skip: int = 0, remote: Remote | None = None) -> Iterator[Sample]:
    """The samples of the shard at ``url``, after the first ``skip`` ones (a URL is
    read through ``remote``: ranged requests with retries).

    Example:
        >>> import io, tarfile, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "s.tar")
        >>> with tarfile.open(path, "w") as tar:
        ...     for name, data in [("0.txt", b"a"), ("0.cls", b"1"), ("1.txt", b"b")]:
        ...         info = tarfile.TarInfo(name); info.size = len(data)
        ...         tar.addfile(info, io.BytesIO(data))
        >>> [(s["__key__"], s["txt"]) for s in read_samples(path)]
        [('0', b'a'), ('1', b'b')]

    Errors:
        TarShardError: an unsafe member, a field twice in one sample, a truncated shard.
        RemoteReadError: a URL whose retry budget ran out.
    """
    where = f"tar shard {url!r}"
    with open_shard(url, remote) as fileobj:
        sample: Sample | None = None
        index = 0
        for name, read in _members(fileobj, where):
            parts = _split_name(name)
            if parts is None:
                continue
            key, field = parts
            if sample is None or sample["__key__"] != key:
                if sample is not None:
                    if index >= skip:
                        yield sample
                    index += 1
                sample = {"__key__": key, "__url__": url}
            if field in sample:
                raise TarShardError(
                    f"{where} has the field {field!r} twice in sample {key!r} (member "
                    f"{name!r}): each key's fields must be distinct"
                )
            sample[field] = read() if index >= skip else b""
        if sample is not None and index >= skip:
            yield sample


def _summary(value: Any) -> str:
    """A short description of a state value for a message (never a dump)."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _todo(state: Any, shards: int, what: str) -> list[list[int]]:
    """The validated ``[[position, taken], ...]`` list of a reader's state."""
    todo = parent_state(state, what, "todo")
    ok = isinstance(todo, list) and all(
        isinstance(entry, list)
        and len(entry) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in entry)
        and entry[0] < shards
        for entry in todo
    )
    if not ok:
        raise StateError(
            f"the state of {what} needs 'todo' as a list of [shard position, samples taken] "
            f"with positions below {shards} (the number of shards), got "
            f"{_summary(todo)}: pass a "
            "state saved by a loader over the same shards"
        )
    return [list(entry) for entry in todo]


class _TarCursor(Cursor[Sample]):
    def __init__(self, urls: list[str], todo: list[list[int]], remote: Remote | None) -> None:
        self._urls = urls
        self._remote = remote
        self._rest = todo  # shards still to read (after the open one); never mutated
        self._open: list[int] | None = None  # [position, taken] of the shard being read
        self._samples: Iterator[Sample] | None = None

    def __next__(self) -> Sample:
        while True:
            if self._samples is None:
                if not self._rest:
                    raise StopIteration
                self._open, self._rest = list(self._rest[0]), self._rest[1:]
                url = self._urls[self._open[0]]
                self._samples = read_samples(url, self._open[1], self._remote)
            sample = next(self._samples, None)
            if sample is not None and self._open is not None:
                self._open = [self._open[0], self._open[1] + 1]
                return sample
            self._samples, self._open = None, None

    def state_dict(self) -> State:
        if self._open is None:
            return {"todo": list(self._rest)}
        return {"todo": [self._open, *self._rest]}


class TarShards(StreamNode[Sample]):
    """Samples of tar shards in the WebDataset layout; built by :func:`from_tar_shards`.

    Elastic: its state is kept per shard, so it resumes under any ``num_workers`` and
    host count (the unfinished shards are dealt anew); so do ``map``, ``filter``,
    ``batch`` and ``shuffle(window)`` over it.

    Resources:
        Each reader holds one shard file open at a time, closed when the shard ends
        or the reader is dropped.

    Errors:
        TarShardError: a member that leaves the archive (absolute path, ``..``, a
            link, a device), a field twice in one sample, a truncated shard.
        StateError: a state from another list of shards.
        RemoteReadError: a remote shard whose retry budget ran out (naming it).
    """

    # Reading waits on the disk or the network without the GIL, and the samples are
    # bytes that threads hand over as they are (processes would pickle them): so
    # worker_mode="auto" runs the stream on threads when its maps are marked too.
    @property
    def releases_gil(self) -> bool:
        return True

    def __init__(
        self,
        urls: Sequence[str],
        *,
        shuffle_shards: bool = False,
        seed: int | None = None,
        remote: Remote | None = None,
    ) -> None:
        self._urls = list(urls)
        if remote is None and self._urls and is_url(self._urls[0]):
            remote = Remote(self._urls[0], {})
        self._remote = remote
        self._shuffle = bool(shuffle_shards)
        self._seed = seed

    @property
    def urls(self) -> list[str]:
        """The shards, sorted (their order in an epoch without ``shuffle_shards``)."""
        return list(self._urls)

    @property
    def elastic(self) -> bool:
        return True

    def shard_order(self, seed: int, epoch: int) -> list[str]:
        """The shards in the order in which ``epoch`` reads them (for the loader's ``seed``).

        Example:
            >>> ds = TarShards(["a.tar", "b.tar", "c.tar"], shuffle_shards=True, seed=0)
            >>> sorted(ds.shard_order(0, 1)) == ds.urls
            True
        """
        if not self._shuffle:
            return list(self._urls)
        own = self._seed if self._seed is not None else seed
        perm = epoch_rng(own, epoch, _SALT).permutation(len(self._urls))
        return [self._urls[i] for i in perm.tolist()]

    def _start(self, part: Shard) -> list[list[int]]:
        return [[u, 0] for u in range(part.index, len(self._urls), part.count)]

    def _open(self, ctx: Context, state: State | None) -> Cursor[Sample]:
        todo = self._start(ctx.shard) if state is None else self._todo(state)
        return _TarCursor(self.shard_order(ctx.seed, ctx.epoch), todo, self._remote)

    def _todo(self, state: State | None) -> list[list[int]]:
        return _todo(state, len(self._urls), "from_tar_shards")

    def _deal_state(self, parts: Sequence[tuple[Shard, State | None]], new: Shard) -> State:
        todo: list[list[int]] = []
        for part, state in parts:
            todo.extend(self._start(part) if state is None else self._todo(state))
        todo.sort()
        positions = [u for u, _ in todo]
        if len(set(positions)) != len(positions):
            raise StateError(
                "the states of the stream's readers list a shard twice: pass the states of "
                "distinct hosts, each saved after the same step"
            )
        return {"todo": todo[new.index :: new.count]}

    def __repr__(self) -> str:
        return f"TarShards({len(self._urls)} shards, shuffle_shards={self._shuffle})"


def from_tar_shards(
    pattern_or_paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    shuffle_shards: bool = False,
    seed: int | None = None,
    storage_options: dict[str, Any] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    retry: RetryPolicy | None = None,
) -> TarShards:
    """A stream of samples from tar shards in the WebDataset layout.

    Members are grouped into samples by key (the name up to the first dot of its
    last component); each sample is a dict of ``"__key__"``, ``"__url__"`` (the
    shard) and one bytes field per extension. Shards are split across hosts and
    workers; the state is kept per shard, so a stream resumes exactly under another
    ``num_workers`` or host count.

    Args:
        pattern_or_paths: a glob (``"shards/*.tar"``, ``"**"`` for subfolders), a
            brace range (``"shard-{000..099}.tar"``), or a list of paths; fsspec URLs
            (``"s3://bucket/shard-{0..9}.tar"``) need ``pip install 'stoker[remote]'``.
        shuffle_shards: read the shards in a fresh order every epoch, drawn from
            (seed, epoch).
        seed: the seed of the shard order; None: the loader's seed.
        storage_options: passed to the fsspec file system of URLs.
        concurrency: most requests in flight at once in each process (URLs).
        retry: how reads of URLs are retried when the store throttles or fails (a
            :class:`~stoker.RetryPolicy`; None: its defaults). A remote shard is
            listed once, when the stream is built, and read in ranged requests of
            4 MiB, each retried on its own.

    Returns:
        A :class:`TarShards` stream (an ``IterDataset`` of dicts).

    Example:
        >>> import io, os, tarfile, tempfile
        >>> import stoker as sk
        >>> root = tempfile.mkdtemp()
        >>> for s in range(2):
        ...     with tarfile.open(os.path.join(root, f"{s}.tar"), "w") as tar:
        ...         for name in (f"{s}0.txt", f"{s}1.txt"):
        ...             info = tarfile.TarInfo(name); info.size = 1
        ...             tar.addfile(info, io.BytesIO(b"x"))
        >>> [s["__key__"] for s in sk.from_tar_shards(os.path.join(root, "*.tar"))]
        ['00', '01', '10', '11']

    Errors:
        ConfigError: a pattern that matches nothing, a missing local file, ``seed``
            that is not an int >= 0.
        MissingExtra: an fsspec URL without fsspec installed.
    """
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise ConfigError(f"from_tar_shards() needs seed as an int >= 0 or None, got {seed!r}")
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ConfigError(f"concurrency must be an int >= 1, got {concurrency!r}")
    policy = check_policy(retry)
    first = pattern_or_paths if isinstance(pattern_or_paths, str | os.PathLike) else None
    if first is None and isinstance(pattern_or_paths, Sequence) and pattern_or_paths:
        first = pattern_or_paths[0]
    remote = None
    if first is not None and is_url(os.fspath(first)):
        remote = Remote(os.fspath(first), storage_options or {}, concurrency, policy)
    urls = list_shards(pattern_or_paths, remote)
    return TarShards(urls, shuffle_shards=shuffle_shards, seed=seed, remote=remote)
