"""File tools confined to the sandbox root: ``files.read``, ``files.write``, ``files.list``."""

from __future__ import annotations

import fnmatch
import os
import stat
from typing import Annotated, Literal

from pydantic import Field
from typing_extensions import TypedDict

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from ._common import make_tool
from .config import StdlibConfig
from .errors import ToolError
from .sandbox import relative_to_root, resolve_in_sandbox

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


def _open_nofollow(real, flags: int, mode: int = 0o644) -> int:
    """Open without following a symlink swapped in after the check (final component)."""
    return os.open(real, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), mode)


def build(config: StdlibConfig) -> list[ToolSpec]:
    root = config.root

    def read(path: Annotated[str, Field(description="file path relative to the sandbox root")],
             encoding: str = "utf-8",
             max_bytes: Annotated[int | None, Field(gt=0)] = None) -> FileContent:
        real = resolve_in_sandbox(root, path, allow_root=False)
        cap = min(max_bytes or config.files_max_bytes, config.files_max_bytes)
        try:
            fd = _open_nofollow(real, os.O_RDONLY)
        except FileNotFoundError:
            raise ToolError("Files.NotFound", f"no such file: {path!r}") from None
        except IsADirectoryError:
            raise ToolError("Files.IsADirectory", f"{path!r} is a directory") from None
        except OSError as exc:
            raise ToolError("Files.Error", f"cannot open {path!r}: {exc.strerror}") from None
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            raise ToolError("Files.IsADirectory", f"{path!r} is a directory")
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
        if make_dirs:
            real.parent.mkdir(parents=True, exist_ok=True)
            resolve_in_sandbox(root, real.parent)  # the created parents are still inside
        existed = real.exists()
        flags = os.O_WRONLY | os.O_CREAT | {"overwrite": os.O_TRUNC, "append": os.O_APPEND,
                                            "create": os.O_EXCL}[mode]
        try:
            fd = _open_nofollow(real, flags)
        except FileExistsError:
            raise ToolError("Files.Exists", f"{path!r} already exists") from None
        except IsADirectoryError:
            raise ToolError("Files.IsADirectory", f"{path!r} is a directory") from None
        except FileNotFoundError:
            raise ToolError("Files.NotFound", f"the directory of {path!r} does not exist") from None
        except OSError as exc:
            raise ToolError("Files.Error", f"cannot write {path!r}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return WriteResult(path=relative_to_root(root, real), bytes_written=len(data),
                           created=not existed)

    def list_(path: Annotated[str, Field(description="directory relative to the sandbox root")] = ".",
              pattern: Annotated[str | None, Field(description="glob on names, e.g. *.csv")] = None,
              recursive: bool = False) -> Listing:
        real = resolve_in_sandbox(root, path)
        if not real.exists():
            raise ToolError("Files.NotFound", f"no such directory: {path!r}")
        if not real.is_dir():
            raise ToolError("Files.NotADirectory", f"{path!r} is not a directory")
        entries: list[Entry] = []
        truncated = False

        def add(dirpath: str, name: str) -> bool:
            full = os.path.join(dirpath, name)
            if pattern and not fnmatch.fnmatch(name, pattern):
                return True
            if len(entries) >= MAX_LIST_ENTRIES:
                return False
            st = os.lstat(full)
            kind: Literal["file", "dir", "symlink", "other"] = (
                "symlink" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode)
                else "file" if stat.S_ISREG(st.st_mode) else "other")
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            entries.append(Entry(name=name, path=rel, type=kind,
                                 size=st.st_size if kind == "file" else None))
            return True

        if recursive:
            for dirpath, dirnames, filenames in os.walk(real, followlinks=False):
                dirnames.sort()
                for name in sorted(dirnames + filenames):
                    if not add(dirpath, name):
                        truncated = True
                        break
                if truncated:
                    break
        else:
            for name in sorted(os.listdir(real)):
                if not add(str(real), name):
                    truncated = True
                    break
        return Listing(path=relative_to_root(root, real), entries=entries, truncated=truncated)

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
