"""Durable runs: per-call checkpoints in a run store (SQLite or PostgreSQL), crash-safe
resume, runs that wait for a person.  See ``docs/runtime.md`` (Durable runs).

Light on import: the backends (``sqlite3``, ``psycopg``) load when a store is opened.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .current import CurrentCall, current_call

__all__ = ["CurrentCall", "current_call", "default_store_url", "open_store"]


def open_store(url: Any) -> Any:
    """A run store for ``url``: ``sqlite:///relative.db``, ``sqlite:////absolute.db``
    (``?synchronous=FULL`` for power-loss durability), ``postgresql://user@host/db``.
    A store object is returned as it is."""
    if not isinstance(url, str):
        return url
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
        if not path:
            raise ValueError(f"store URL {url!r} names no file: sqlite:///path.db")
        opts = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        from .sqlite import SqliteRunStore

        return SqliteRunStore(path, synchronous=opts.get("synchronous", "NORMAL"))
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresRunStore

        return PostgresRunStore(url)
    raise ValueError(f"unknown store URL {url!r}: use sqlite:///path.db or postgresql://...")


def default_store_url() -> str:
    """``$SOPHON_DSL_STORE``, else the per-user SQLite file under ``$XDG_DATA_HOME/sophon-dsl``."""
    given = os.environ.get("SOPHON_DSL_STORE")
    if given:
        return given
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return "sqlite:///" + os.path.join(base, "sophon-dsl", "runs.sqlite3")
