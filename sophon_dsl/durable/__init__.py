"""Durable runs: per-call checkpoints in a run store (SQLite or PostgreSQL), crash-safe
resume, runs that wait for a person.  See ``docs/runtime.md`` (Durable runs).

Light on import: the backends (``sqlite3``, ``psycopg``) load when a store is opened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import OptionError
from .current import CurrentCall, current_call

if TYPE_CHECKING:  # (the backends load when a store is opened)
    from .base import RunStore

__all__ = ["CurrentCall", "Lent", "current_call", "default_store_url", "delete_runs", "open_owned", "open_store",
           "parse_age", "prune_runs", "sqlite_path"]


@dataclass(frozen=True, slots=True)
class Lent:
    """A store lent to a run that must leave it open when it ends, whoever else closes it
    after *its* run (``close_after_run``): a plan step's sub-agent records its run in the plan
    run's store (``goals/plan_steps.py``)."""

    store: RunStore


def open_owned(store: Any) -> tuple[Any, bool]:
    """(the run store for ``store``, whether the run that opens it closes it when it ends):
    one it opened from a URL, or one handed over to close (``close_after_run``); never a
    :class:`Lent` one."""
    if isinstance(store, Lent):
        return store.store, False
    backend = open_store(store)
    return backend, backend is not store or backend.close_after_run


def open_store(url: Any, *, create: bool = True) -> Any:
    """A run store for ``url``: ``sqlite:///relative.db``, ``sqlite:////absolute.db``
    (``?synchronous=FULL`` for power-loss durability), ``postgresql://user@host/db``.
    A store object is returned as it is.  ``create=False`` (readers): a database without
    the store's tables raises ``StoreNotFound`` (``Store.NotFound``) and is left as it was."""
    if not isinstance(url, str):
        return url
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
        if not path:
            raise OptionError(f"store URL {url!r} names no file: sqlite:///path.db", code="Store.UrlInvalid")
        opts = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        from .sqlite import SqliteRunStore

        return SqliteRunStore(path, synchronous=opts.get("synchronous", "NORMAL"), create=create)
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresRunStore

        return PostgresRunStore(url, create=create)
    raise OptionError(f"unknown store URL {url!r}: use sqlite:///path.db or postgresql://...",
                      code="Store.UrlInvalid")


def sqlite_path(url: Any) -> str | None:
    """The file a ``sqlite://`` store URL names (None for another kind of store)."""
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        return None
    return unquote(parts.path[1:] if parts.path.startswith("/") else parts.path) or None


_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (or a number of seconds) -> seconds."""
    t = str(text).strip().lower()
    unit = _AGE_UNITS.get(t[-1:]) if t else None
    try:
        value = float(t[:-1] if unit else t)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise OptionError(f"expected an age such as 30d, 12h, 90m or 45s, got {text!r}")
    return value * (unit or 1)


def _opened(store: Any) -> tuple[Any, bool]:
    """(the store, whether we opened it and so close it): a URL, None (the default) or a store."""
    if store is None or isinstance(store, str):
        return open_store(store or default_store_url()), True
    return store, False


def delete_runs(run_ids: Any, *, store: Any = None) -> list[str]:
    """Delete recorded runs (``sophon-dsl runs delete``): each with its log, calls and
    sub-runs; returns the ids that existed.  A run running now is refused (``StoreError``)."""
    st, mine = _opened(store)
    try:
        return st.delete_runs([run_ids] if isinstance(run_ids, str) else list(run_ids))
    finally:
        if mine:
            st.close()


def prune_runs(older_than: Any, *, status: str | None = None, store: Any = None) -> list[str]:
    """Delete the runs last updated longer ago than ``older_than`` (seconds, or ``"30d"``):
    those with ``status``, else every finished one (``sophon-dsl runs prune``)."""
    age = parse_age(older_than) if isinstance(older_than, str) else float(older_than)
    if not age >= 0:
        raise OptionError(f"older_than must be >= 0, not {older_than!r}")
    st, mine = _opened(store)
    try:
        return st.prune_runs(age, status)
    finally:
        if mine:
            st.close()


def default_store_url() -> str:
    """``$SOPHON_DSL_STORE``, else the per-user SQLite file under ``$XDG_DATA_HOME/sophon-dsl``."""
    given = os.environ.get("SOPHON_DSL_STORE")
    if given:
        return given
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return "sqlite:///" + os.path.join(base, "sophon-dsl", "runs.sqlite3")
