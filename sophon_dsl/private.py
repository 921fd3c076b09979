"""Files that hold run data are private to the user who runs them.

The run store and the memory store keep tool outputs (file contents, HTTP bodies,
memories): they are created with directories 0700 and files 0600 whatever the umask, and
an existing one that other users can read gets a :class:`PermissionsWarning` naming it
(we warn rather than chmod: a wider mode may be the owner's choice, e.g. a shared group).

SQLite gives its ``-wal``, ``-shm`` and ``-journal`` files the permissions of the database
file, so creating the database file 0600 before SQLite opens it makes them 0600 too.

Directories are checked only inside sophon-dsl's own data directory
(``$XDG_DATA_HOME/sophon-dsl``): a directory the user named for a store (``/tmp``, a
project folder) is theirs to set.
"""

from __future__ import annotations

import os
import stat
import warnings

from .errors import SophonError

__all__ = ["PermissionsWarning", "data_dir", "private_dirs", "private_sqlite_file"]

_SIDECARS = ("-wal", "-shm", "-journal")


class PermissionsWarning(SophonError, UserWarning):
    """A store file or directory sophon-dsl keeps run data in is open to other users."""


def data_dir() -> str:
    """``$XDG_DATA_HOME/sophon-dsl`` (``~/.local/share/sophon-dsl`` by default), read from
    the environment each time (a test or a caller that sets it gets its own)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "sophon-dsl")


def _ours(path: str) -> bool:
    own = os.path.abspath(data_dir())
    path = os.path.abspath(path)
    return path == own or path.startswith(own + os.sep)


def _mode(path: str, want_dir: bool) -> int | None:
    """The permission bits of ``path`` when it is a directory (``want_dir``) or a regular
    file and other users have any access to it; None otherwise (missing, private)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    kind = stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode)
    mode = stat.S_IMODE(st.st_mode)
    return mode if kind and mode & 0o077 else None


def _warn(found: list[tuple[str, int]]) -> None:
    if not found:
        return
    shown = ", ".join(f"{p} (mode {m:o})" for p, m in found)
    warnings.warn(f"other users can access run data: {shown}; "
                  f"make it private with chmod 700 (directories) / chmod 600 (files)",
                  PermissionsWarning, stacklevel=3)


def private_dirs(path: str) -> None:
    """Create directory ``path`` and its missing parents with mode 0700 (``os.makedirs``
    gives 0700 to the last one only); warn when one inside sophon-dsl's data directory
    already exists with a wider mode."""
    _warn(_make_dirs(path))


def private_sqlite_file(path: str) -> None:
    """Make sure the SQLite database ``path`` exists, created 0600 (an empty file is an
    empty database), with its directory private; warn (once, naming each) about an
    existing database, its sidecar files or its directory (inside the data directory) open
    to other users."""
    path = os.fspath(path)
    found = _make_dirs(os.path.dirname(os.path.abspath(path)))
    try:
        # O_EXCL: only a file made here gets the mode; an existing one is checked below
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    # (a path sqlite3.connect cannot open, a directory or no permission, it reports itself)
    found += [(p, m) for p in (path, *(path + s for s in _SIDECARS)) if (m := _mode(p, False)) is not None]
    _warn(found)


def _make_dirs(path: str) -> list[tuple[str, int]]:
    path = os.path.abspath(path)
    missing = []
    probe = path
    while not os.path.isdir(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:  # another process made it meanwhile
            pass
    if not missing and _ours(path) and (mode := _mode(path, True)) is not None:
        return [(path, mode)]
    return []
