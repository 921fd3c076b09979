"""File tools confined to the sandbox root: ``files.read``, ``files.write``, ``files.list``."""

from __future__ import annotations

import fnmatch
import os
import stat
from typing import Annotated, Literal

from typing_extensions import TypedDict

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from ._common import Field, make_tool
from .config import StdlibConfig, uses_config
from .errors import ToolError
from .sandbox import open_dir_in_sandbox, open_in_sandbox, relative_to_root, resolve_in_sandbox

__all__ = ["build", "FileContent", "WriteResult", "Listing", "Entry"]

MAX_LIST_ENTRIES = 1000


class FileContent(TypedDict):
    path: str
    content: str
    size: int
    truncated: bool


class WriteResult(TypedDict):
    path: str
    bytes_written: int
    created: bool


class Entry(TypedDict):
    name: str
    path: str
    type: Literal["file", "dir", "symlink", "other"]
    size: int | None


class Listing(TypedDict):
    path: str
    entries: list[Entry]
    truncated: bool


def _open(root, real, flags: int, shown: str, make_dirs: bool = False) -> int:
    """:func:`open_in_sandbox` with the OS errors named (FileExistsError is left to the caller)."""
    try:
        return open_in_sandbox(root, real, flags, shown=shown, make_dirs=make_dirs)
    except (ToolError, FileExistsError):
        raise
    except FileNotFoundError:
        raise ToolError("Files.NotFound", f"no such file: {shown!r}") from None
    except IsADirectoryError:
        raise ToolError("Files.IsADirectory", f"{shown!r} is a directory") from None
    except OSError as exc:
        raise ToolError("Files.Error", f"cannot open {shown!r}: {exc.strerror}") from None


@uses_config("sandbox_root", "files_max_bytes")
def build(config: StdlibConfig) -> list[ToolSpec]:
    root = config.root

    def read(path: Annotated[str, Field(description="file path relative to the sandbox root")],
             encoding: str = "utf-8",
             max_bytes: Annotated[int | None, Field(gt=0)] = None) -> FileContent:
        real = resolve_in_sandbox(root, path, allow_root=False)
        cap = min(max_bytes or config.files_max_bytes, config.files_max_bytes)
        fd = _open(root, real, os.O_RDONLY, path)
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(cap + 1)
        truncated = len(data) > cap
        data = data[:cap]
        try:
            text = data.decode(encoding, errors="replace" if truncated else "strict")
        except UnicodeDecodeError:
            raise ToolError("Files.Binary", f"{path!r} is not {encoding} text") from None
        except LookupError:
            raise ToolError("Files.InvalidEncoding", f"unknown encoding {encoding!r}") from None
        return FileContent(path=relative_to_root(root, real), content=text, size=size,
                           truncated=truncated)

    def write(path: Annotated[str, Field(description="file path relative to the sandbox root")],
              content: str,
              mode: Literal["overwrite", "append", "create"] = "overwrite",
              make_dirs: bool = True, encoding: str = "utf-8") -> WriteResult:
        real = resolve_in_sandbox(root, path, allow_root=False)
        try:
            data = str(content).encode(encoding)
        except LookupError:
            raise ToolError("Files.InvalidEncoding", f"unknown encoding {encoding!r}") from None
        if len(data) > config.files_max_bytes:
            raise ToolError("Files.TooLarge", f"content is {len(data)} bytes; the limit is "
                            f"{config.files_max_bytes}")
        flags = os.O_WRONLY | (os.O_APPEND if mode == "append" else 0)
        created = True
        try:  # created here, or opened as it is (never truncated before the checks pass)
            fd = _open(root, real, flags | os.O_CREAT | os.O_EXCL, path, make_dirs)
        except FileExistsError:
            if mode == "create":
                raise ToolError("Files.Exists", f"{path!r} already exists") from None
            created = False
            try:
                fd = _open(root, real, flags, path)
            except FileExistsError:  # pragma: no cover - not asked to create
                raise ToolError("Files.Exists", f"{path!r} already exists") from None
        with os.fdopen(fd, "wb") as fh:
            if mode == "append":  # the limit is per file: what is there counts
                size = os.fstat(fh.fileno()).st_size
                if size + len(data) > config.files_max_bytes:
                    raise ToolError("Files.TooLarge", f"{path!r} would grow to {size + len(data)} bytes; "
                                    f"the limit is {config.files_max_bytes}")
            elif mode == "overwrite":
                os.ftruncate(fh.fileno(), 0)
            fh.write(data)
        return WriteResult(path=relative_to_root(root, real), bytes_written=len(data),
                           created=created)

    def list_(path: Annotated[str, Field(description="directory relative to the sandbox root")] = ".",
              pattern: Annotated[str | None, Field(description="glob on names, e.g. *.csv")] = None,
              recursive: bool = False) -> Listing:
        real = resolve_in_sandbox(root, path)
        top = open_dir_in_sandbox(root, real, shown=path)  # walked by descriptor: no link followed
        base = relative_to_root(root, real)
        entries: list[Entry] = []
        truncated = False

        def add(dirfd: int, dirpath: str, name: str) -> bool:
            if pattern and not fnmatch.fnmatch(name, pattern):
                return True
            if len(entries) >= MAX_LIST_ENTRIES:
                return False
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except OSError:  # gone since the listing
                return True
            kind: Literal["file", "dir", "symlink", "other"] = (
                "symlink" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode)
                else "file" if stat.S_ISREG(st.st_mode) else "other")
            rel = name if dirpath == "." else f"{dirpath}/{name}"
            rel = rel if base == "." else f"{base}/{rel}"
            entries.append(Entry(name=name, path=rel, type=kind,
                                 size=st.st_size if kind == "file" else None))
            return True

        try:
            if recursive:
                for dirpath, dirnames, filenames, dirfd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
                    dirnames.sort()
                    where = os.path.normpath(dirpath).replace(os.sep, "/")
                    for name in sorted(dirnames + filenames):
                        if not add(dirfd, where, name):
                            truncated = True
                            break
                    if truncated:
                        break
            else:
                for name in sorted(os.listdir(top)):
                    if not add(top, ".", name):
                        truncated = True
                        break
        finally:
            os.close(top)
        return Listing(path=base, entries=entries, truncated=truncated)

    return [
        make_tool(read, "files.read", Risk.LOW,
                  "Read a text file inside the sandbox root. Paths are relative to the root; `..`, "
                  "symlinks and absolute paths that lead outside it are refused."),
        make_tool(write, "files.write", Risk.MEDIUM,
                  "Write (overwrite, append or create-only) a text file inside the sandbox root, "
                  "creating parent directories. Paths that lead outside the root are refused."),
        make_tool(list_, "files.list", Risk.LOW,
                  "List a directory inside the sandbox root (optionally recursive, filtered by a glob "
                  "on names). Symlinks are reported, not followed."),
    ]
