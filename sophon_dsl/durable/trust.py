"""A stored run is data, not configuration (issue 24, item 11; docs/security.md).

The CLI keeps a run's tool flags and providers with the run (``spec.meta``), so that
``sophon-dsl resume RUN_ID`` and ``sophon-dsl approve RUN_ID`` build the same tools again.
Those values decide what code is imported (``--tools FILE.py``, a module, an MCP command),
which directory the file tools may touch (``--sandbox``), which hosts the HTTP tools may
reach (``--allow-host``, ``--stdlib-config``) and where prompts go (``--provider``).  The
store is shared data (a SQLite file, a PostgreSQL database) that other people or programs
can write, so a row must never be able to choose them.

The rule: a resume takes a configuration value from the row only when

* the row's ``meta`` carries a *seal*, an HMAC-SHA256 of the meta under a per-user key
  (``$XDG_DATA_HOME/sophon-dsl/run-key``, 0600, made on the first recorded run) that no
  one without the key can forge, so the values are the ones this user's ``run`` recorded;
* and every file the meta names (tools files, the stdlib configuration) still has the
  SHA-256 recorded when the run began (``meta.fingerprints``): a file replaced since then
  is not imported on the row's word.

Otherwise the value must be given on the command line again (then the command line's is
used, the row's ignored); a row that would supply a value it cannot vouch for is refused
with :data:`CONFIG_UNTRUSTED` / :data:`CONFIG_CHANGED`, before anything is imported.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from typing import Any, Iterable

from ..errors import SophonError

__all__ = ["CONFIG_CHANGED", "CONFIG_UNTRUSTED", "StoredConfigError", "check_meta", "key_path", "seal_meta",
           "verify_meta"]

CONFIG_UNTRUSTED = "Store.ConfigUntrusted"
CONFIG_CHANGED = "Store.ConfigChanged"

_SEAL, _FINGERPRINTS = "seal", "fingerprints"
_KEY_BYTES = 32


class StoredConfigError(SophonError):
    """The row would supply a configuration value it cannot vouch for (``error`` is
    :data:`CONFIG_UNTRUSTED` or :data:`CONFIG_CHANGED`); nothing was imported."""

    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error, self.cause = error, cause


def key_path() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "sophon-dsl", "run-key")


def _read_key(path: str) -> bytes | None:
    """The key, when the file is this user's own and nobody else can read or write it (a key
    others can read lets them forge seals)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or (hasattr(os, "getuid")
                                                                   and st.st_uid != os.getuid()):
            return None
        data = os.read(fd, 256)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) >= _KEY_BYTES else None


def _key(create: bool) -> bytes | None:
    path = key_path()
    key = _read_key(path)
    if key is not None or not create or os.path.lexists(path):
        return key
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return _read_key(path)
    except OSError:  # a read-only home: runs are not sealed, resumes need their flags again
        return None
    try:
        os.write(fd, secrets.token_bytes(_KEY_BYTES))
    finally:
        os.close(fd)
    return _read_key(path)


def _canonical(meta: dict) -> bytes:
    body = {k: v for k, v in meta.items() if k != _SEAL}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode()


def _sha256(path: str) -> str | None:
    """The file's SHA-256, or None when it is not a regular file we can read (a device such
    as /dev/zero is never read)."""
    try:
        if not os.path.isfile(path):
            return None
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def _named_files(meta: dict) -> list[str]:
    """The files a meta names whose content is configuration: tools sources that are files
    (Python, declarations, MCP configs) and the stdlib configuration."""
    out = [t for t in meta.get("tools") or () if isinstance(t, str)]
    if isinstance(meta.get("stdlib_config"), str):
        out.append(meta["stdlib_config"])
    return out


def seal_meta(meta: dict) -> dict:
    """``meta`` with the fingerprints of the files it names and its seal (no seal when the
    key cannot be made: a resume then needs the flags again)."""
    out = json.loads(json.dumps({k: v for k, v in meta.items() if k not in (_SEAL, _FINGERPRINTS)}, default=str))
    prints = {p: h for p in _named_files(out) for h in [_sha256(p)] if h is not None}
    out[_FINGERPRINTS] = prints
    key = _key(create=True)
    if key is not None:
        out[_SEAL] = hmac.new(key, _canonical(out), hashlib.sha256).hexdigest()
    return out


def verify_meta(meta: dict) -> tuple[str, str] | None:
    """None when ``meta`` is sealed under this user's key and the files it names are as they
    were; else ``(error code, why)``."""
    seal = meta.get(_SEAL)
    key = _key(create=False)
    if not isinstance(seal, str) or key is None:
        return CONFIG_UNTRUSTED, ("its stored configuration carries no seal of this user's run key"
                                  if key is not None or not isinstance(seal, str) else
                                  f"this user has no run key ({key_path()}) to check its seal with")
    if not hmac.compare_digest(seal, hmac.new(key, _canonical(meta), hashlib.sha256).hexdigest()):
        return CONFIG_UNTRUSTED, "its stored configuration was changed since the run recorded it (the seal does " \
                                 "not match), or another user recorded it"
    prints = meta.get(_FINGERPRINTS) or {}
    for path in _named_files(meta):
        if not os.path.exists(path) and path not in prints:
            continue  # a module name or an mcp: spec, sealed with the rest
        now = _sha256(path)
        if now is None or now != prints.get(path):
            return CONFIG_CHANGED, f"{_show(path)} changed since the run began (its SHA-256 differs)"
    return None


def _show(value: Any) -> str:
    from ..runtime.approval import bounded_text  # the prompt's escaping: a row's text is never interpreted

    return bounded_text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str), 200)


def _unset(value: Any) -> bool:
    return value is None or value is False or value == [] or value == () or value == ""


def check_meta(meta: dict | None, used: Iterable[str], run_id: str) -> dict:
    """The meta values in ``used`` a resume may take from the row (the others: the
    command line's).  Raises :class:`StoredConfigError` when one of them is set and the row
    cannot vouch for it (see the module docstring)."""
    meta = meta if isinstance(meta, dict) else {}
    wanted = {k: meta.get(k) for k in used if not _unset(meta.get(k))}
    if not wanted:
        return {}
    problem = verify_meta(meta)
    if problem is None:
        return wanted
    error, why = problem
    raise StoredConfigError(error, f"run {_show(run_id)}: {why}, so its configuration is not taken from the "
                                   f"store and nothing was imported (the store says: {_as_flags(wanted)}). "
                                   "To continue the run, give the flags you mean on the command line: then "
                                   "the store's are not used")


def _as_flags(values: dict) -> str:
    """``--tools A --tools B --sandbox D``: what the row holds, as flags (escaped: row text)."""
    out = []
    for key, value in sorted(values.items()):
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        else:
            out.extend(f"{flag} {_show(v)}" for v in (value if isinstance(value, list) else [value]))
    return " ".join(out)
