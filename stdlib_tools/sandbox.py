"""Path confinement shared by files, documents and shell."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .errors import ToolError

__all__ = ["open_in_sandbox", "resolve_in_sandbox", "relative_to_root"]


def resolve_in_sandbox(root: Path, path: str | os.PathLike[str], *, allow_root: bool = True) -> Path:
    """The real path ``path`` denotes inside ``root``, or ``ToolError`` ``Files.OutsideSandbox``.

    Relative paths are taken from ``root``; absolute paths must already lie inside it.
    Symlinks are resolved before checking, so neither ``..`` nor a link can lead out.
    ``root`` must be absolute and resolved (``StdlibConfig.root``).
    """
    text = os.fspath(path)
    if not isinstance(text, str):
        raise ToolError("Files.InvalidPath", "path must be a string")
    if "\x00" in text:
        raise ToolError("Files.InvalidPath", "path contains a NUL byte")
    text = text.strip() or "."
    try:
        candidate = Path(text).expanduser() if text.startswith("~") else Path(text)
    except RuntimeError:  # ~nosuchuser, or no home directory: pathlib says RuntimeError
        user = text.split("/", 1)[0]
        raise ToolError("Files.InvalidPath", f"cannot expand {user!r} in {text!r}: no such user "
                                             "or no home directory", path=text) from None
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        real = candidate.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # symlink loops
        raise ToolError("Files.InvalidPath", f"cannot resolve {text!r}: {exc}") from None
    if real != root and not real.is_relative_to(root):
        raise ToolError("Files.OutsideSandbox",
                        f"path {text!r} is outside the sandbox root", path=text)
    if real == root and not allow_root:
        raise ToolError("Files.InvalidPath", f"path {text!r} is the sandbox root itself")
    return real


def relative_to_root(root: Path, real: Path) -> str:
    rel = real.relative_to(root).as_posix()
    return rel or "."


# --- opening without a check-then-open race --------------------------------------------------
#
# resolve_in_sandbox says which real path a name means; between that check and the open,
# another process may swap a directory on the way for a symlink leading out.  So the real
# path is walked again one component at a time from a descriptor of the root, each opened
# with O_NOFOLLOW (openat-style): a component that became a symlink fails the open instead
# of being followed.  The file opened must be a regular file with a single link (a hard link
# made beforehand is another name for a file that may live outside the sandbox).

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _raced(shown: str) -> ToolError:
    return ToolError("Files.OutsideSandbox", f"path {shown!r} changed while it was opened "
                     "(a symlink appeared on the way): refused", path=shown)


def _is_link(name: str, dirfd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _walk_to_parent(root: Path, parts: tuple[str, ...], shown: str, make_dirs: bool) -> int:
    """A descriptor of the directory holding the last of ``parts``, reached from ``root``
    without following any symlink (creating missing directories when ``make_dirs``)."""
    dirfd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in parts[:-1]:
            if make_dirs:
                try:
                    os.mkdir(part, 0o777, dir_fd=dirfd)
                except FileExistsError:
                    pass
            try:
                nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dirfd)
            except FileNotFoundError:
                raise ToolError("Files.NotFound", f"the directory of {shown!r} does not exist") from None
            except OSError as exc:  # O_NOFOLLOW on a link: ELOOP, or ENOTDIR with O_DIRECTORY
                if exc.errno == errno.ELOOP or _is_link(part, dirfd):
                    raise _raced(shown) from None
                if isinstance(exc, NotADirectoryError):
                    raise ToolError("Files.NotADirectory", f"a component of {shown!r} is not a directory") from None
                raise ToolError("Files.Error", f"cannot open {shown!r}: {exc.strerror}") from None
            os.close(dirfd)
            dirfd = nxt
    except BaseException:
        os.close(dirfd)
        raise
    return dirfd


def open_in_sandbox(root: Path, real: Path, flags: int, *, shown: str, mode: int = 0o644,
                    make_dirs: bool = False) -> int:
    """Open ``real`` (a path resolve_in_sandbox returned) relative to a descriptor of
    ``root``, component by component with O_NOFOLLOW; the file must be a regular file with
    one link.  ``O_TRUNC`` is not passed on: truncate once the checks pass."""
    parts = real.relative_to(root).parts
    if not parts:
        raise ToolError("Files.IsADirectory", f"{shown!r} is the sandbox root itself")
    dirfd = _walk_to_parent(root, parts, shown, make_dirs)
    try:
        fd = os.open(parts[-1], (flags & ~os.O_TRUNC) | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _raced(shown) from None
        raise
    finally:
        os.close(dirfd)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError("Files.IsADirectory", f"{shown!r} is a directory")
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the reader forever, a device worse
            raise ToolError("Files.NotARegularFile", f"{shown!r} is not a regular file")
        if st.st_nlink > 1:
            raise ToolError("Files.HardLink", f"{shown!r} has {st.st_nlink} hard links: another name "
                            "for it may lie outside the sandbox, so it is not opened")
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir_in_sandbox(root: Path, real: Path, *, shown: str) -> int:
    """A descriptor of the directory ``real``, reached as :func:`open_in_sandbox` reaches a file."""
    parts = real.relative_to(root).parts
    if not parts:
        return os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    dirfd = _walk_to_parent(root, parts, shown, False)
    try:
        return os.open(parts[-1], os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dirfd)
    except FileNotFoundError:
        raise ToolError("Files.NotFound", f"no such directory: {shown!r}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP or _is_link(parts[-1], dirfd):
            raise _raced(shown) from None
        if isinstance(exc, NotADirectoryError):
            raise ToolError("Files.NotADirectory", f"{shown!r} is not a directory") from None
        raise ToolError("Files.Error", f"cannot open {shown!r}: {exc.strerror}") from None
    finally:
        os.close(dirfd)
