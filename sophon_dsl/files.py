"""Writing a file so that nothing is lost: a reader (or a crash) sees the old content or
the new one, never a truncated file (temp file in the same directory, fsync, rename).
Used by ``fmt -w`` and by everything that keeps state in a file (saved tool chains)."""

from __future__ import annotations

import os

__all__ = ["write_file"]


def write_file(path: str, text: str) -> bool:
    """Write ``text`` to ``path`` (UTF-8) atomically: a reader (or a crash) sees the old
    content or the new, never a truncated file.  False, writing nothing, when the file
    already holds exactly ``text``.  OSError when it cannot be written."""
    import tempfile  # not at the top: ``--help`` imports this module

    data = text.encode("utf-8")  # before anything is touched: text that cannot be written fails here
    try:
        with open(path, "rb") as fh:
            if fh.read(len(data) + 1) == data:
                return False
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
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
