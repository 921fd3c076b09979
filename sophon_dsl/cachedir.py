"""The per-user cache directory: the standard library's derived tool schemas
(``stdlib_tools/_common.py``).  Only what can be rebuilt goes there; deleting it costs one
slower start.  (The DSL parser's tables were cached here too; they are now a generated
module, ``syntax/_lalr_parser.py``, and old ``lalr-*.pickle`` files are no longer read.)"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["cache_dir", "prune_stale"]

#: a cache file of another version not written for this long is deleted (see prune_stale)
STALE_AFTER_S = 30 * 24 * 3600


def cache_dir() -> Path | None:
    """The per-user cache directory, or ``None`` when none is usable.

    ``$SOPHON_DSL_CACHE_DIR``, else ``$XDG_CACHE_HOME/sophon-dsl``, else
    ``~/.cache/sophon-dsl``. The directory is created private to the user; one that
    cannot be created or written, or that another user owns, is not used (only the
    user's own files are loaded).
    """
    explicit = os.environ.get("SOPHON_DSL_CACHE_DIR")
    if explicit:
        path = Path(explicit)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "sophon-dsl"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        owner_ok = not hasattr(os, "getuid") or path.stat().st_uid == os.getuid()
        if owner_ok and os.access(path, os.W_OK | os.X_OK):
            return path
    except OSError:
        pass
    return None


def prune_stale(directory: Path, pattern: str, keep: str, *, now: float | None = None,
                max_age: float = STALE_AFTER_S) -> int:
    """Delete the files of ``directory`` matching ``pattern`` (a glob), but ``keep``, not
    modified for ``max_age`` seconds (:data:`STALE_AFTER_S`): each upgrade of the package (or of what a cache file
    depends on) starts a new file, and the old ones would otherwise stay forever.  Another
    install still in use only rebuilds its file once.  Called when a new file is made;
    returns how many went (errors: none do, it is only a cache)."""
    limit = (time.time() if now is None else now) - max_age
    gone = 0
    for path in directory.glob(pattern):
        if path.name == keep:
            continue
        try:
            if path.stat().st_mtime <= limit:
                path.unlink()
                gone += 1
        except OSError:
            pass
    return gone
