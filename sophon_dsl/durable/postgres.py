"""The server run store: PostgreSQL through psycopg 3 (the ``postgres`` extra).

Same schema, operations and group commit as the SQLite store (:mod:`.base`); the
migrations run under a transaction-scoped advisory lock, so processes opening one
database at once apply them once.
"""

from __future__ import annotations

from typing import Any

from ..errors import SophonError
from .base import RunStore

__all__ = ["PostgresDriverMissing", "PostgresRunStore"]


class PostgresDriverMissing(SophonError, RuntimeError):
    """psycopg 3 is not installed (the ``postgres`` extra)."""

    code = "Store.DriverMissing"

_MIGRATION_LOCK = 0x50D0_0013  # any constant of ours: pg_advisory_xact_lock key


class PostgresRunStore(RunStore):
    def __init__(self, url: str) -> None:
        self.url = url
        super().__init__()

    def sql(self, text: str) -> str:
        return text.replace("?", "%s").replace(" REAL", " DOUBLE PRECISION")

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - the extra is not installed
            raise PostgresDriverMissing("PostgreSQL stores need psycopg 3: pip install 'sophon-dsl[postgres]'") from exc
        return psycopg.connect(self.url, autocommit=False)

    def _begin(self, conn: Any) -> Any:
        return conn.cursor()  # psycopg opens the transaction on the first statement

    def _migrate_lock(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
