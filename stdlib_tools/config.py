"""Configuration of the standard tool library."""

from __future__ import annotations

import functools
import os
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, TypeVar

__all__ = ["StdlibConfig", "default_memory_path", "default_sandbox_path", "only_fields", "uses_config"]

_Build = TypeVar("_Build", bound=Callable[..., Any])


def default_memory_path() -> str:
    """Where memories persist when no ``memory_db_path`` is configured: one SQLite file per
    user, ``$XDG_DATA_HOME/sophon-dsl/memory.sqlite3`` (``~/.local/share/...`` by default).

    Read from the environment each time a configuration is made, so a test (or a caller)
    that sets ``XDG_DATA_HOME`` gets its own store."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "sophon-dsl", "memory.sqlite3")


def default_sandbox_path() -> str:
    """The files tools' directory when none is configured: a dedicated one per user,
    ``$XDG_DATA_HOME/sophon-dsl/sandbox`` (created, mode 0700, when a tool first uses it),
    never the current directory, whose ``.env`` and keys a plan could otherwise read."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "sophon-dsl", "sandbox")


@dataclass(frozen=True)
class StdlibConfig:
    """Everything the standard tools need to know about the machine they run on.

    Tools are built per config (closures), so two configs never share state in memory;
    configs that name the same ``memory_db_path`` file share the memories stored there.
    Frozen and hashable: ``stdlib_tools.source`` builds the tools once per equal config.
    """

    # files, documents, shell: every path is confined to this directory (by default a
    # dedicated one, see default_sandbox_path; --sandbox DIR or sandbox_root to choose)
    sandbox_root: str | os.PathLike[str] = field(default_factory=default_sandbox_path)
    files_max_bytes: int = 1_000_000

    # http: hosts ("api.local", "*.corp.example") or IPs / CIDRs ("127.0.0.1", "10.1.0.0/16")
    # let through the SSRF guard
    http_allow_list: tuple[str, ...] = ()
    http_timeout: float = 20.0
    http_max_response_bytes: int = 1_000_000
    http_max_redirects: int = 5
    http_user_agent: str = "sophon-dsl-stdlib/0.1"
    http_transport: Any = None  # an httpx.AsyncBaseTransport (tests: httpx.MockTransport)

    # memory: an SQLite file (created with its directory on first use), or ":memory:" for a
    # store that lives as long as the tools built from this config
    memory_db_path: str = field(default_factory=default_memory_path)
    memory_busy_timeout: float = 10.0  # seconds to wait for another writer (then Memory.Busy)

    # email
    smtp_host: str | None = None
    smtp_port: int = 25
    smtp_user: str | None = None
    smtp_password: str | None = None
    smtp_sender: str | None = None
    smtp_starttls: bool | None = None  # None: use STARTTLS when the server offers it
    smtp_ssl: bool = False             # implicit TLS (port 465)
    smtp_timeout: float = 30.0

    # shell (off unless enabled)
    enable_shell: bool = False
    shell_timeout: float = 30.0
    shell_max_timeout: float = 300.0
    shell_max_output: int = 100_000

    # time
    max_sleep: float = 60.0

    # text
    truncate_chars: int = 8000

    # what one call of a data / text tool may produce (Result.TooLarge past it)
    max_result_bytes: int = 16 << 20

    def __post_init__(self) -> None:
        hosts = self.http_allow_list or ()
        if isinstance(hosts, str):  # one host given as a string: one entry, never its characters
            hosts = (hosts,)
        object.__setattr__(self, "http_allow_list", tuple(hosts))

    @property
    def root(self) -> Path:
        """The sandbox root, absolute and with symlinks resolved; the default one is
        created on first use (a root the caller names must exist)."""
        path = Path(self.sandbox_root).expanduser()
        if os.path.abspath(path) == os.path.abspath(default_sandbox_path()):
            # created 0700 with its parents (Path.mkdir gives the mode to the last one only);
            # an existing one other users can enter gets a warning
            from sophon_dsl.private import private_dirs

            private_dirs(str(path))
        return path.resolve()


def only_fields(config: StdlibConfig, names: frozenset[str]) -> StdlibConfig:
    """``config`` with every field but ``names`` back at its default.

    A group's tools are closures over the configuration they are built from, and a closure
    travels whole: pickled for a Dask worker (docs/scale-out.md), ``files.read`` would carry
    the SMTP password.  Each group closes over a copy holding only what it reads."""
    dropped = {}
    for f in fields(config):
        if f.name in names or not f.init:
            continue
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        if getattr(config, f.name) != default:
            dropped[f.name] = default
    return replace(config, **dropped) if dropped else config


def uses_config(*names: str) -> Callable[[_Build], _Build]:
    """Declare the configuration fields a group's ``build(config, ...)`` reads; it is then
    handed :func:`only_fields` of the caller's configuration, whoever calls it.  A field
    read but not declared reads its default (a test of the group catches that); a name that
    is not a field fails at import."""
    known = {f.name for f in fields(StdlibConfig)}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ValueError(f"not StdlibConfig fields: {', '.join(unknown)}")
    keep = frozenset(names)

    def decorate(build: _Build) -> _Build:
        @functools.wraps(build)
        def sliced(config: StdlibConfig, *args: Any, **kwargs: Any) -> Any:
            return build(only_fields(config, keep), *args, **kwargs)

        sliced.config_fields = keep  # type: ignore[attr-defined]
        return sliced  # type: ignore[return-value]

    return decorate
