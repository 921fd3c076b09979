"""The server run store: PostgreSQL through psycopg 3 (the ``postgres`` extra).

Same schema and operations as the SQLite store (:mod:`.base`); the migrations run under a
transaction-scoped advisory lock, so processes opening one database at once apply them once.

What a durable run commits per pass of its event loop (log entries, call records, intents,
the run's last sequence number) goes as **one statement**: data-modifying CTEs over
``unnest`` of one array parameter per column, in autocommit mode (a single statement is
its own transaction).  That is one round trip per commit instead of one per statement plus
BEGIN and COMMIT (five for a completion: on a chain each call waits for two commits), and
the rows cost a string escape each instead of psycopg's per-row ``executemany`` work (the
arrays are written as PostgreSQL array literals here: psycopg's list adaptation is slower
still).  Any other operation runs in an explicit transaction (``BEGIN`` ... ``COMMIT``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .base import RunStore, merged_rows

__all__ = ["PostgresRunStore"]

_MIGRATION_LOCK = 0x50D0_0013  # any constant of ours: pg_advisory_xact_lock key

# the statement's parts, each over ``unnest`` of one array parameter per column; a batch's
# statement holds the parts it has rows for (a chain's commits are an intent alone, or a
# completion's log entries, record and last sequence number: the server runs no empty part)
_PARTS = (
    "INSERT INTO log (run_id, seq, entry) SELECT * FROM unnest(%s::text[], %s::integer[], %s::text[])",
    ("INSERT INTO calls (run_id, call_id, record) SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]) "
     "ON CONFLICT (run_id, call_id) DO UPDATE SET record = excluded.record"),
    ("INSERT INTO intents (run_id, call_id, idem_key, created) "
     "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::double precision[]) "
     "ON CONFLICT (run_id, call_id) DO NOTHING"),
    ("UPDATE runs SET last_seq = v.seq FROM unnest(%s::text[], %s::integer[]) AS v (run_id, seq) "
     "WHERE runs.run_id = v.run_id AND runs.last_seq < v.seq"),
)
_statements: dict[tuple, str] = {}


def _statement(present: tuple) -> str:
    """One statement of the parts present (data-modifying CTEs but the last): a few fixed
    texts, which psycopg prepares after a few runs."""
    text = _statements.get(present)
    if text is None:
        parts = [part for part, here in zip(_PARTS, present) if here]
        ctes = ", ".join(f"p{k} AS ({part})" for k, part in enumerate(parts[:-1]))
        text = _statements[present] = (f"WITH {ctes} " if ctes else "") + parts[-1]
    return text


def text_array(values: Iterable[str]) -> str:
    """A PostgreSQL array literal of these strings: every element quoted, ``\\`` and ``"``
    escaped (inside quotes nothing else is special: commas, braces, spaces, newlines)."""
    return '{"' + '","'.join([v.replace("\\", "\\\\").replace('"', '\\"') for v in values]) + '"}' \
        if values else "{}"


def number_array(values: Iterable[Any]) -> str:
    """A PostgreSQL array literal of ints or floats (``repr`` round-trips a float)."""
    return "{" + ",".join(map(repr, values)) + "}"


class PostgresRunStore(RunStore):
    rows_alone = True  # _write_rows is one statement: autocommit makes it a transaction

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
        # autocommit: the row batches' one statement commits alone; _begin opens the others'
        return psycopg.connect(self.url, autocommit=True)

    def _begin(self, conn: Any) -> Any:
        cur = conn.cursor()
        cur.execute("BEGIN")
        return cur

    def _rollback(self, conn: Any) -> None:
        conn.rollback()  # (nothing to do when no transaction is open: a failed lone statement)

    def _migrate_lock(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))

    def _write_rows(self, cur: Any, ops: list) -> None:
        # (one row per call: ON CONFLICT DO UPDATE may not meet one key twice in a statement)
        log, calls, intents, last = merged_rows(ops)
        if not (log or calls or intents):
            return
        params: list = []
        if log:
            params += (text_array([r[0] for r in log]), number_array([r[1] for r in log]),
                       text_array([r[2] for r in log]))
        if calls:
            params += (text_array([k[0] for k in calls]), text_array([k[1] for k in calls]),
                       text_array(list(calls.values())))
        if intents:
            params += (text_array([r[0] for r in intents]), text_array([r[1] for r in intents]),
                       text_array([r[2] for r in intents]), number_array([r[3] for r in intents]))
        if last:
            params += (text_array([r[1] for r in last]), number_array([r[0] for r in last]))
        cur.execute(_statement((bool(log), bool(calls), bool(intents), bool(last))), params)
