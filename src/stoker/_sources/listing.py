"""Safe listing of local files: the paths a pattern names, never leaving the root.

``from_files`` and ``from_image_folder`` list their files here. A listing walks the
directory tree itself (instead of ``glob``, which follows every symlink) and applies
three rules to every symbolic link it meets:

* a link whose target lies inside the root (after resolving every link on the way)
  is followed: a linked file is listed under its link's name and read from its
  target; a linked directory is walked;
* a link whose target leaves the root, a link that loops (``a -> b -> a``, or a
  directory link back to one of its own ancestors) and a link to nothing are
  *unsafe*: with ``on_unsafe="error"`` the listing stops with an
  :class:`~stoker.errors.ConfigError` naming the link and its target; with
  ``on_unsafe="skip"`` it leaves the link out and reports it in ``Listing.skipped``;
* nothing is ever read through a link that was not resolved and checked.

Names starting with ``.`` (hidden files and folders) are left out of directory walks.
The paths come back sorted, so the order does not depend on the file system.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError

__all__ = [
    "ON_UNSAFE",
    "Listing",
    "check_on_unsafe",
    "glob_prefix",
    "is_glob",
    "list_local",
    "pattern_regex",
    "walk_files",
]

ON_UNSAFE = ("error", "skip")

PathLike = str | os.PathLike[str]


def is_glob(text: str) -> bool:
    """True when ``text`` holds a glob character (``*``, ``?`` or ``[``).

    Example:
        >>> is_glob("data/**/*.jpg"), is_glob("data/a.jpg")
        (True, False)
    """
    return any(c in text for c in "*?[")


def glob_prefix(pattern: str) -> str:
    """The directory part of ``pattern`` before its first glob character.

    Example:
        >>> glob_prefix("data/train/**/*.jpg"), glob_prefix("*.jpg")
        ('data/train', '.')
    """
    parts = pattern.split("/")
    fixed: list[str] = []
    for part in parts[:-1]:
        if is_glob(part):
            break
        fixed.append(part)
    prefix = "/".join(fixed)
    if pattern.startswith("/") and not prefix:
        return "/"
    return prefix or "."


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A regular expression for a glob ``pattern`` relative to its root.

    ``**`` matches any number of folders, ``*`` and ``?`` stay within one name, and
    ``[...]`` is a character class (``[!...]`` negated).

    Example:
        >>> rx = pattern_regex("**/*.jpg")
        >>> [bool(rx.fullmatch(p)) for p in ("a.jpg", "x/y/a.jpg", "a.png")]
        [True, True, False]
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out))


def check_on_unsafe(on_unsafe: str) -> None:
    """Raise :class:`ConfigError` unless ``on_unsafe`` is ``"error"`` or ``"skip"``."""
    if on_unsafe not in ON_UNSAFE:
        raise ConfigError(f"on_unsafe must be 'error' or 'skip', got {on_unsafe!r}")


@dataclass
class Listing:
    """The files found: ``paths`` (as listed, sorted), ``real`` (what each is read from)
    and ``skipped`` (``"link: reason"`` for every unsafe link left out)."""

    paths: list[str] = field(default_factory=list)
    real: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def sort(self) -> None:
        """Put the files in sorted order of their listed paths."""
        order = sorted(range(len(self.paths)), key=self.paths.__getitem__)
        self.paths = [self.paths[i] for i in order]
        self.real = [self.real[i] for i in order]


class _Walker:
    """One walk under ``root`` (resolved once), applying the link rules."""

    def __init__(
        self,
        root: str,
        on_unsafe: str,
        listing: Listing,
        keep: Callable[[str], bool] | None = None,
    ) -> None:
        self.root = os.path.realpath(root)
        self.on_unsafe = on_unsafe
        self.listing = listing
        self.keep = keep

    def inside(self, real: str) -> bool:
        return real == self.root or real.startswith(self.root.rstrip(os.sep) + os.sep)

    def unsafe(self, link: str, reason: str) -> None:
        if self.on_unsafe == "skip":
            self.listing.skipped.append(f"{link}: {reason}")
            return
        raise ConfigError(
            f"unsafe symbolic link {link!r}: {reason}; stoker never follows links out of "
            f"the root {self.root!r} (pass root= a folder that holds the target, remove the "
            "link, or pass on_unsafe='skip' to leave such links out)"
        )

    def resolve(self, path: str) -> str | None:
        """The checked real path of a link, or None when it is unsafe (reported)."""
        try:
            real = str(Path(path).resolve(strict=True))
        except (RuntimeError, OSError) as exc:  # RuntimeError: a loop (Python < 3.13)
            looped = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == 40
            target = _readlink(path)
            if looped:
                self.unsafe(path, f"it is part of a symbolic link loop (-> {target!r})")
            else:
                self.unsafe(path, f"it points to {target!r}, which does not exist")
            return None
        if not self.inside(real):
            self.unsafe(path, f"it points to {real!r}, outside the root")
            return None
        return real

    def walk(
        self,
        folder: str,
        real_folder: str,
        ancestors: frozenset[str],
        rel: str = "",
        depth: int | None = None,
    ) -> None:
        """List the files below ``folder``; ``depth``: how many more folder levels to enter."""
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except FileNotFoundError as exc:
            raise ConfigError(f"no such directory: {folder!r}") from exc
        keep = self.keep
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = os.path.join(folder, entry.name)
            real = os.path.join(real_folder, entry.name)
            name = rel + entry.name
            deeper = depth is None or depth > 0
            if entry.is_symlink():
                if not deeper and keep is not None and not keep(name):
                    continue  # cannot match: its target does not matter
                resolved = self.resolve(path)
                if resolved is None:
                    continue
                real = resolved
                if os.path.isdir(real):
                    if not deeper:
                        continue
                    if real in ancestors:
                        self.unsafe(
                            path, f"it points to {real!r}, a folder it is inside of (a loop)"
                        )
                        continue
                    self.walk(path, real, ancestors | {real}, name + "/", _less(depth))
                    continue
            elif entry.is_dir(follow_symlinks=False):
                if deeper:
                    self.walk(path, real, ancestors | {real}, name + "/", _less(depth))
                continue
            if os.path.isfile(real) and (keep is None or keep(name)):
                self.listing.paths.append(path)
                self.listing.real.append(real)


def _less(depth: int | None) -> int | None:
    return None if depth is None else depth - 1


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def walk_files(
    folder: str,
    root: str,
    on_unsafe: str,
    keep: Callable[[str], bool] | None = None,
    depth: int | None = None,
) -> Listing:
    """Every file below ``folder`` (recursively, sorted), under the link rules of ``root``.

    ``keep(relative_path)`` filters the files (relative to ``folder``, ``/``-separated);
    ``depth`` limits how many folder levels below ``folder`` are entered (None: all).

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp(); open(os.path.join(d, "a.txt"), "w").close()
        >>> [os.path.basename(p) for p in walk_files(d, d, "error").paths]
        ['a.txt']

    Errors:
        ConfigError: ``folder`` does not exist or is not a directory; an unsafe link
            under ``on_unsafe="error"``.
    """
    if not os.path.isdir(folder):
        raise ConfigError(f"no such directory: {folder!r}")
    listing = Listing()
    walker = _Walker(root, on_unsafe, listing, keep)
    start = folder
    real_start = walker.resolve(folder) if os.path.islink(folder) else os.path.realpath(folder)
    if real_start is None:
        return listing
    if not walker.inside(real_start):
        raise ConfigError(f"the folder {folder!r} is not inside the root {root!r}")
    walker.walk(start, real_start, frozenset({real_start}), "", depth)
    listing.sort()
    return listing


def _one_file(path: str, root: str, on_unsafe: str, listing: Listing) -> None:
    walker = _Walker(root, on_unsafe, listing)
    if os.path.islink(path) or not walker.inside(os.path.realpath(path)):
        if not os.path.lexists(path):
            raise ConfigError(f"no such file: {path!r}")
        real = walker.resolve(path)
        if real is None:
            return
    else:
        real = os.path.realpath(path)
    if not os.path.isfile(real):
        raise ConfigError(f"no such file: {path!r}")
    listing.paths.append(path)
    listing.real.append(real)


def _matcher(regex: re.Pattern[str], keep: Callable[[str], bool] | None) -> Callable[[str], bool]:
    return lambda rel: bool(regex.fullmatch(rel)) and (keep is None or keep(rel))


def list_local(
    items: PathLike | Sequence[PathLike],
    root: PathLike | None,
    on_unsafe: str,
    keep: Callable[[str], bool] | None = None,
) -> tuple[Listing, str]:
    """The files that a pattern, a directory, a file or a list of them name, and the root.

    The default root is the pattern's non-glob prefix (a directory: itself; a list:
    the folder that holds all its items). Patterns and directories are listed sorted;
    a list keeps its order, each pattern's matches sorted in place.

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> for name in ("b.txt", "a.txt", "c.bin"):
        ...     open(os.path.join(d, name), "w").close()
        >>> listing, _ = list_local(os.path.join(d, "*.txt"), None, "error")
        >>> [os.path.basename(p) for p in listing.paths]
        ['a.txt', 'b.txt']

    Errors:
        ConfigError: no items, a pattern matching nothing, a missing file or directory,
            an unsafe link under ``on_unsafe="error"``.
    """
    check_on_unsafe(on_unsafe)
    many = not isinstance(items, str | os.PathLike)
    listed: Sequence[PathLike] = [items] if isinstance(items, str | os.PathLike) else items
    texts = [os.fspath(p) for p in listed]
    if not texts:
        raise ConfigError("needs at least one path, glob or directory")
    if root is not None:
        base = os.fspath(root)
    elif many and len(texts) > 1:
        base = os.path.commonpath(
            [os.path.abspath(glob_prefix(t) if is_glob(t) else t) for t in texts]
        )
        base = base if os.path.isdir(base) else os.path.dirname(base)
    else:
        text = texts[0]
        base = glob_prefix(text) if is_glob(text) else text
        base = base if os.path.isdir(base) or is_glob(text) else os.path.dirname(base) or "."
    if not os.path.isdir(base):
        raise ConfigError(f"no such directory: {base!r} (the root of the files to read)")
    found = Listing()
    for text in texts:
        if is_glob(text):
            prefix = glob_prefix(text)
            if not os.path.isdir(prefix):
                raise ConfigError(f"no such directory: {prefix!r} (in the pattern {text!r})")
            relative = text[len(prefix) :].lstrip("/") if prefix != "." else text
            regex = pattern_regex(relative)
            part = walk_files(
                prefix,
                base,
                on_unsafe,
                _matcher(regex, keep),
                None if "**" in relative else relative.count("/"),
            )
            if not part.paths:
                raise ConfigError(f"the pattern {text!r} matches no file (check the path)")
        elif os.path.isdir(text):
            part = walk_files(text, base, on_unsafe, keep)
            if not part.paths and not part.skipped:
                raise ConfigError(f"the directory {text!r} holds no file")
        else:
            part = Listing()
            _one_file(text, base, on_unsafe, part)
        found.paths += part.paths
        found.real += part.real
        found.skipped += part.skipped
    return found, base
