"""The embedded run store: one SQLite file (stdlib ``sqlite3``), WAL, one writer thread.

``synchronous=NORMAL`` (the default) survives any crash of the process; a power loss may
lose the last transactions but never corrupts the file.  ``synchronous="FULL"`` syncs
every commit (power-loss durability, slower).  Several processes may share the file: the
busy timeout makes a writer wait for the other's transaction instead of failing.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..errors import OptionError
from ..private import private_sqlite_file
from .base import RunStore

__all__ = ["SqliteRunStore"]


class SqliteRunStore(RunStore):
    def __init__(self, path: str, *, synchronous: str = "NORMAL", busy_timeout: float = 30.0,
                 create: bool = True) -> None:
        if synchronous.upper() not in ("NORMAL", "FULL", "EXTRA", "OFF"):
            raise OptionError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self.path = path
        self.url = f"sqlite:///{path}"
        self.synchronous = synchronous.upper()
        self.busy_timeout = busy_timeout
        super().__init__(create=create)

    def _connect(self) -> Any:
        if self.path != ":memory:":
            # it holds tool outputs: private (0700 / 0600, sidecars too), a warning if it is not
            private_sqlite_file(self.path)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None,
                               check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        return conn

    def _begin(self, conn: Any) -> Any:
        cur = conn.cursor()
        cur.execute("BEGIN IMMEDIATE")  # take the write lock now: no upgrade deadlock between processes
        return cur

    def _commit(self, conn: Any) -> None:
        conn.execute("COMMIT")

    def _rollback(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
