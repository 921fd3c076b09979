"""Writing a file so that nothing is lost: a reader (or a crash) sees the old content or
the new one, never a truncated file (temp file in the same directory, fsync, rename).
Used by ``fmt -w`` and by everything that keeps state in a file (saved tool chains)."""

from __future__ import annotations

import errno
import os

__all__ = ["write_file"]


def write_file(path: str, text: str) -> bool:
    """Write ``text`` to ``path`` (UTF-8) atomically: a reader (or a crash) sees the old
    content or the new, never a truncated file.  False, writing nothing, when the file
    already holds exactly ``text``.  A symlink's target is written (the link stays); a
    read-only file is not replaced (PermissionError).  OSError when it cannot be written."""
    import tempfile  # not at the top: ``--help`` imports this module

    data = text.encode("utf-8")  # before anything is touched: text that cannot be written fails here
    # through a symlink: its target is written and the link stays a link (as black does)
    path = os.path.realpath(path)
    try:
        with open(path, "rb") as fh:
            if fh.read(len(data) + 1) == data:
                return False
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    else:
        # a rename would replace a read-only file as easily as any other: refuse, as an
        # editor does (checked on the bits too: root passes every access check)
        if not mode & 0o222 or not os.access(path, os.W_OK):
            raise PermissionError(errno.EACCES, "the file is read-only (not replaced)", path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                               prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it 0600: keep the file's own permissions
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _sync_directory(os.path.dirname(os.path.abspath(path)))
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _sync_directory(directory: str) -> None:
    """Make the rename itself durable (best effort: not every system opens directories)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
