"""The server run store: PostgreSQL through psycopg 3 (the ``postgres`` extra).

Same schema and operations as the SQLite store (:mod:`.base`); the migrations run under a
transaction-scoped advisory lock, so processes opening one database at once apply them once.

What a durable run commits per pass of its event loop (log entries, call records, intents)
goes as **one statement** in autocommit mode (a single statement is its own transaction):
one round trip per commit, where BEGIN, one statement per table (and an update of the run's
last sequence number, now read from the log instead) and COMMIT were five for a completion
(on a chain, each call waits for two commits: its intent, then its parent's completion).
Each column travels as one JSON array parameter, zipped back into rows by ``ROWS FROM
(json_array_elements...)``: the log entries and records are JSON texts already, joined between
brackets as they are (the server hands each element's text back unchanged), the ids and numbers one
C-encoded JSON list.  That replaces psycopg's per-row ``executemany`` work (about 20 us per call in
the writer thread) by a join; psycopg's adaptation of Python lists as PostgreSQL arrays was slower
still.  Any other operation runs in an explicit transaction (``BEGIN`` ... ``COMMIT``). """

from __future__ import annotations

from typing import Any

from ..errors import SophonError
from .base import RunStore, dumps_flat, merged_rows

__all__ = ["PostgresDriverMissing", "PostgresRunStore"]


class PostgresDriverMissing(SophonError, RuntimeError):
    """psycopg 3 is not installed (the ``postgres`` extra)."""

    code = "Store.DriverMissing"

_MIGRATION_LOCK = 0x50D0_0013  # any constant of ours: pg_advisory_xact_lock key


def _rows_from(columns: str, casts: str, *elements: str) -> str:
    """``SELECT`` of rows zipped from one JSON array parameter per column (``elements``:
    ``text`` for a JSON array of strings or numbers, ``json`` for one of JSON values, whose
    text comes back as it was sent)."""
    funcs = ", ".join(f"json_array_elements{'_text' if e == 'text' else ''}(%s::json)" for e in elements)
    return f"SELECT {casts} FROM ROWS FROM ({funcs}) AS t ({columns})"


# the statement's parts, each as (one row, many rows); a batch's statement holds those it has
# rows for (a chain's commits are an intent alone, or a completion's log entry and record):
# one row goes as plain VALUES, which the server runs faster than a zip of JSON arrays
_INTO = ("INSERT INTO log (run_id, seq, entry) ", "INSERT INTO calls (run_id, call_id, record) ",
         "INSERT INTO intents (run_id, call_id, idem_key, created) ")
_ON_CONFLICT = ("", " ON CONFLICT (run_id, call_id) DO UPDATE SET record = excluded.record",
                " ON CONFLICT (run_id, call_id) DO NOTHING")
_ROWS = (_rows_from("r, s, e", "r, s::integer, e::text", "text", "text", "json"),
         _rows_from("r, c, e", "r, c, e::text", "text", "text", "json"),
         _rows_from("r, c, k, w", "r, c, k, w::double precision", "text", "text", "text", "text"))
_PARTS = tuple((into + "VALUES (%s, %s, %s" + (", %s)" if k == 2 else ")") + tail, into + rows + tail)
               for k, (into, rows, tail) in enumerate(zip(_INTO, _ROWS, _ON_CONFLICT)))
# intents that share their creation time (a journal's batch: Journal._Batch.created), which then
# goes once, as the first parameter, instead of one float's text per row
_PARTS = (*_PARTS[:2], (*_PARTS[2], _INTO[2] + _rows_from("r, c, k", "r, c, k, %s::double precision",
                                                           "text", "text", "text") + _ON_CONFLICT[2]))
_statements: dict[tuple, str] = {}


def _statement(shape: tuple) -> str:
    """One statement of the parts present (data-modifying CTEs but the last), per part its
    form: 0 absent, 1 one row, 2 more rows, 3 more intents of one creation time (a few fixed
    texts, which psycopg prepares after a few runs)."""
    text = _statements.get(shape)
    if text is None:
        parts = [part[n - 1] for part, n in zip(_PARTS, shape) if n]
        ctes = ", ".join(f"p{k} AS ({part})" for k, part in enumerate(parts[:-1]))
        text = _statements[shape] = (f"WITH {ctes} " if ctes else "") + parts[-1]
    return text


def _json_texts(texts: list[str]) -> str:
    """A JSON array of values that are JSON texts already (a log entry, a record)."""
    return "[" + ",".join(texts) + "]"


class PostgresRunStore(RunStore):
    rows_alone = True  # _write_rows is one statement: autocommit makes it a transaction
    # the commits do not update the run's row (an UPDATE per commit was a quarter of a
    # completion's time on the server, and a new version of the row each time): its last
    # sequence number is read from the log, the last entry of its (run_id, seq) key
    last_seq_sql = "(SELECT COALESCE(MAX(seq), -1) FROM log WHERE log.run_id = runs.run_id) AS last_seq"

    # (to_regclass follows the search path, as the unqualified names of the schema do)
    schema_exists_sql = "SELECT CASE WHEN to_regclass('schema_migrations') IS NULL THEN 0 ELSE 1 END"

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = url
        super().__init__(create=create)

    def sql(self, text: str) -> str:
        return text.replace("?", "%s").replace(" REAL", " DOUBLE PRECISION")

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - the extra is not installed
            raise PostgresDriverMissing("PostgreSQL stores need psycopg 3: pip install 'sophon-dsl[postgres]'") from exc
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
        log, calls, intents = merged_rows(ops)
        if not (log or calls or intents):
            return
        params: list = []
        if len(log) == 1:
            params += log[0]
        elif log:
            params += (dumps_flat([r[0] for r in log]), dumps_flat([r[1] for r in log]),
                       _json_texts([r[2] for r in log]))
        if len(calls) == 1:
            ((run_id, call_id), record), = calls.items()
            params += (run_id, call_id, record)
        elif calls:
            params += (dumps_flat([k[0] for k in calls]), dumps_flat([k[1] for k in calls]),
                       _json_texts(list(calls.values())))
        form = min(len(intents), 2)
        if form == 1:
            params += intents[0]
        elif form:
            columns = [dumps_flat([r[0] for r in intents]), dumps_flat([r[1] for r in intents]),
                       dumps_flat([r[2] for r in intents])]
            created = {r[3] for r in intents}
            if len(created) == 1:  # (a float's text costs more than a string's: written once)
                form = 3
                params += (*created, *columns)
            else:
                params += (*columns, dumps_flat([r[3] for r in intents]))
        cur.execute(_statement((min(len(log), 2), min(len(calls), 2), form)), params)
