"""The server run store: PostgreSQL through psycopg 3 (the ``postgres`` extra).

Same schema, operations and group commit as the SQLite store (:mod:`.base`); the
migrations run under a transaction-scoped advisory lock, so processes opening one
database at once apply them once.
"""

from __future__ import annotations

from typing import Any

from .base import RunStore

__all__ = ["PostgresRunStore"]

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
            raise RuntimeError("PostgreSQL stores need psycopg 3: pip install 'sophon-dsl[postgres]'") from exc
        return psycopg.connect(self.url, autocommit=False)

    def _begin(self, conn: Any) -> Any:
        return conn.cursor()  # psycopg opens the transaction on the first statement

    def _migrate_lock(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))

    def _statements(self) -> tuple:
        st = self.__dict__.get("_stmts")
        if st is None:
            add_log, add_call, add_intent, set_last = super()._statements()
            st = self._stmts = (_Columns(_ADD_LOG), _Columns(_ADD_CALLS, last_wins=2), _Columns(_ADD_INTENTS), set_last)
        return st


# A batch's rows as one statement over arrays, one per column: one round of adapting and
# executing instead of one per row (what executemany does).  Same conflicts as the
# one-row statements: a log row already there fails the batch.
_ADD_LOG = ("INSERT INTO log (run_id, seq, entry) "
            "SELECT * FROM unnest(%s::text[], %s::integer[], %s::text[])")
_ADD_CALLS = ("INSERT INTO calls (run_id, call_id, record) SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]) "
              "ON CONFLICT (run_id, call_id) DO UPDATE SET record = excluded.record")
_ADD_INTENTS = ("INSERT INTO intents (run_id, call_id, idem_key, created) "
                "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::double precision[]) "
                "ON CONFLICT (run_id, call_id) DO NOTHING")


class _Columns:
    """Rows sent as one array per column.  ``last_wins``: the rows are upserts keyed by
    their first ``last_wins`` columns; one statement may not update a row twice, so only
    each key's last row is sent (what upserting them in turn leaves)."""

    __slots__ = ("sql", "last_wins")

    def __init__(self, sql: str, last_wins: int = 0) -> None:
        self.sql, self.last_wins = sql, last_wins

    def __call__(self, cur: Any, rows: list) -> None:
        if self.last_wins:
            k = self.last_wins
            rows = list({row[:k]: row for row in rows}.values())
        cur.execute(self.sql, [list(col) for col in zip(*rows)])
