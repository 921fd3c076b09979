"""Path confinement shared by files, documents and shell."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ToolError

__all__ = ["resolve_in_sandbox", "relative_to_root"]


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
    candidate = Path(text).expanduser() if text.startswith("~") else Path(text)
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
