"""A store that stops committing after ``limit`` transactions: an in-process crash."""

from __future__ import annotations

import sqlite3
import time

from sophon_dsl.durable.base import StoreError
from sophon_dsl.durable.sqlite import SqliteRunStore


class FaultyStore(SqliteRunStore):
    def __init__(self, path: str, limit: int) -> None:
        self.limit = limit
        super().__init__(path)

    def _transaction(self, conn, ops):
        if self.transactions >= self.limit:
            return StoreError("injected: the store stopped committing")
        return super()._transaction(conn, ops)


def forget_lease(path: str, run_id: str) -> None:
    """What a dead process leaves: its lease, which a resume in the same test process (the
    same pid) must not wait for."""
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET lease_owner = NULL, lease_until = NULL WHERE run_id = ?", (run_id,))


class SlowCommits(SqliteRunStore):
    """Every transaction takes ``delay`` seconds more: what a call ends leaves a wide window
    before its completion is committed."""

    def __init__(self, path: str, delay: float) -> None:
        self.delay = delay
        super().__init__(path)

    def _transaction(self, conn, ops):
        time.sleep(self.delay)
        return super()._transaction(conn, ops)
