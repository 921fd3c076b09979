"""The run store: what a durable run keeps, and the one writer thread that keeps it.

A :class:`RunStore` holds, per run: a row (status, plan and tool-source hash, what is needed to
resume, the lease, the final summary), the committed log entries, one record per committed
call, the intent records of calls about to start, and the approval decisions.  Everything is
JSON text; nothing is pickled.

Every operation goes through one writer thread that drains a queue: the operations found
waiting are run in one transaction (group commit), then each one's future is resolved.
Backends (:mod:`.sqlite`, :mod:`.postgres`) give the connection, the SQL dialect and the
schema migrations; the operations themselves are written once, here.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from concurrent.futures import Future, InvalidStateError
from typing import Any, Callable, Iterable

from ..errors import SophonError

_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_encode_str = json.encoder.encode_basestring  # (ensure_ascii=False)

__all__ = ["CANCEL_DECISION", "STORE_NOT_FOUND", "CancelReader", "Landing", "MIGRATIONS", "RunStore", "StoreError",
           "StoreNotFound", "dumps", "display_url", "merged_rows"]

# the decision name under which `sophon-dsl cancel` asks a run's holder to stop (base.RunStore.request_cancel)
CANCEL_DECISION = "cancel"

# Versioned schema: each entry is (version, statements); a store applies the ones above the
# version it finds, in one transaction, and records each in schema_migrations.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY, plan_id TEXT, goal TEXT, status TEXT NOT NULL,
            created REAL NOT NULL, updated REAL NOT NULL, plan_hash TEXT, spec TEXT NOT NULL,
            summary TEXT, last_seq INTEGER NOT NULL DEFAULT -1,
            lease_owner TEXT, lease_until REAL)""",
        "CREATE INDEX runs_status ON runs (status, created)",
        """CREATE TABLE log (
            run_id TEXT NOT NULL, seq INTEGER NOT NULL, entry TEXT NOT NULL,
            PRIMARY KEY (run_id, seq))""",
        """CREATE TABLE calls (
            run_id TEXT NOT NULL, call_id TEXT NOT NULL, record TEXT NOT NULL,
            PRIMARY KEY (run_id, call_id))""",
        """CREATE TABLE intents (
            run_id TEXT NOT NULL, call_id TEXT NOT NULL, idem_key TEXT NOT NULL, created REAL NOT NULL,
            PRIMARY KEY (run_id, call_id))""",
        """CREATE TABLE decisions (
            run_id TEXT NOT NULL, name TEXT NOT NULL, decision TEXT NOT NULL,
            PRIMARY KEY (run_id, name))""",
    )),
    (2, (
        # tool chains an agent created (seed 000's tool.create_chain), kept for later runs
        """CREATE TABLE chains (
            name TEXT PRIMARY KEY, definition TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL)""",
    )),
    (3, (
        # an agent run's replies as they streamed (sophon_dsl.durable.agent_run): one row per
        # piece of text, in order; a row with final = 1 (and no text) marks a complete reply
        """CREATE TABLE agent_replies (
            run_id TEXT NOT NULL, turn INTEGER NOT NULL, seq INTEGER NOT NULL, text TEXT NOT NULL,
            final INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (run_id, turn, seq))""",
    )),
    (4, (
        # what `runs list` shows of a run without reading its spec (the plan text): the plan's
        # file name and number of calls (NULL in runs recorded before)
        "ALTER TABLE runs ADD COLUMN plan_file TEXT",
        "ALTER TABLE runs ADD COLUMN calls_total INTEGER",
    )),
    (5, (
        # the attempts so far of a call being retried, written at each retry so that the
        # dashboard draws them while the call runs; once the call ends its record in `calls`
        # holds them all (its "attempt_log"), and that record is what a resume reads
        """CREATE TABLE attempts (
            run_id TEXT NOT NULL, call_id TEXT NOT NULL, record TEXT NOT NULL,
            PRIMARY KEY (run_id, call_id))""",
    )),
)

_RUN_COLUMNS = ("run_id", "plan_id", "goal", "status", "created", "updated", "plan_hash", "spec", "summary",
                "last_seq", "lease_owner", "lease_until", "plan_file", "calls_total")


class CancelReader:
    """A run store's cancel requests read on a connection of its own, opened on the first read
    (see :meth:`RunStore.cancel_reader`); calls are made one at a time, from any thread.

    ``close()`` may come from another thread while a read is in flight (the watcher's task is
    cancelled while its read runs in an executor): the connection is then closed by the read
    when it ends, never under it (closing an SQLite connection another thread is using
    crashes the process)."""

    def __init__(self, store: "RunStore", stmt: str) -> None:
        self._connect = store._connect
        self._stmt = stmt
        self._conn: Any = None
        self._lock = threading.Lock()
        self._busy = False
        self._closed = False

    def __call__(self, run_id: str) -> dict | None:
        with self._lock:
            if self._closed:
                return None
            if self._conn is None:
                self._conn = self._connect()
            conn, self._busy = self._conn, True
        row = None
        try:
            cur = conn.cursor()
            cur.execute(self._stmt, (run_id, CANCEL_DECISION))
            row = cur.fetchone()
        finally:
            try:
                conn.rollback()  # (PostgreSQL opened a transaction for the read: not left open)
            finally:
                with self._lock:
                    self._busy = False
                    if self._closed:
                        self._drop()
        return json.loads(row[0]) if row is not None else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if not self._busy:
                self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - nothing more to read
                pass
            self._conn = None


class StoreError(SophonError):
    """A store operation failed (``Store.*`` errors of the runtime wrap it)."""


STORE_NOT_FOUND = "Store.NotFound"


class StoreNotFound(StoreError):
    """A store opened only to read (``create=False``) holds no run store: its database has
    none of our tables, so no run was ever recorded there.  Nothing was created."""

    code = STORE_NOT_FOUND


def display_url(url: str) -> str:
    """``url`` as messages show it: without the password a server URL may carry (in its
    user part or as a ``password=`` parameter)."""
    import re

    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    userinfo, at, host = netloc.rpartition("@")
    if sep and at and ":" in userinfo:
        url = f"{scheme}://{userinfo.partition(':')[0]}:***@{host}{slash}{path}"
    return re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", url)


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(value: Any) -> str:
    """Compact JSON text (what every column of the store holds): ``json.dumps(value,
    ensure_ascii=False, separators=(",", ":"), allow_nan=False)``, without building a
    ``JSONEncoder`` per value (a durable run encodes two values per call)."""
    if _make_encoder is None:  # pragma: no cover - no C accelerator
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # what json.dumps runs for these options: a fresh markers dict keeps the circularity check
    return "".join(_make_encoder({}, _refuse, _encode_str, None, ":", ",", False, False, False)(value, 0))


# one encoder for values that cannot be circular (no circularity check: no state between calls)
_flat = _make_encoder(None, _refuse, _encode_str, None, ":", ",", False, False, False) if _make_encoder else None
SCALARS = frozenset((str, int, float, bool, type(None)))


def dumps_flat(value: Any) -> str:
    """:func:`dumps` of a value the caller built that cannot hold itself: its own dict or
    tuple around scalars and tuples of scalars (a log entry whose value is a scalar, the
    record of a call with no error and no output kept)."""
    if _flat is None:  # pragma: no cover - no C accelerator
        return dumps(value)
    return "".join(_flat(value, 0))


Op = Callable[[Any], Any]  # run with the backend's cursor inside the batch's transaction


class RunStore:
    """A durable run store (see the module docstring).  Subclasses give ``_connect``,
    ``_begin``, ``_commit``, ``_rollback``, ``_migrate_lock`` and ``sql`` (``?`` placeholders
    rewritten to the driver's).  Public methods returning a :class:`Future` are queued;
    the others wait for their result."""

    url: str = ""
    max_batch = 512
    # lent to one run (the CLI opens the store and hands it over): the run closes it when it ends
    close_after_run = False

    def __init__(self, *, create: bool = True) -> None:
        # create=False (a reader: the dashboard, `runs`, `approve`): a database without our
        # schema is StoreNotFound, not given an empty store (a mistyped database name would
        # otherwise look like "no runs", and leave tables behind)
        self.create = create
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._ready = threading.Event()
        self._open_error: BaseException | None = None
        self.transactions = 0  # committed batches (benchmarks, fault injection)
        self._thread = threading.Thread(target=self._writer, name="sophon-store", daemon=True)
        self._thread.start()
        self._ready.wait()
        if isinstance(self._open_error, StoreNotFound):
            raise self._open_error
        if self._open_error is not None:
            raise StoreError(f"cannot open the store {display_url(self.url)}: {self._open_error}") from self._open_error

    # -- the writer thread --------------------------------------------------------------

    def _writer(self) -> None:
        try:
            conn = self._connect()
            self._migrate(conn)
        except BaseException as exc:  # noqa: BLE001 - reported by __init__
            self._open_error = exc
            self._ready.set()
            return
        self._ready.set()
        get = self._queue.get
        while True:
            item = get()
            if item is None:
                break
            batch = [item]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            self._run_batch(conn, batch)
            if stop:
                break
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass

    def _run_batch(self, conn: Any, batch: list) -> None:
        """Run the batch in one transaction; if one operation fails, each one again on its
        own so that only that one's future fails."""
        results = self._transaction(conn, [op for op, _f, _n in batch])
        if isinstance(results, BaseException) and len(batch) > 1:
            for item in batch:
                self._deliver([item], self._transaction(conn, [item[0]]))
            return
        self._deliver(batch, results)

    def _transaction(self, conn: Any, ops: list) -> Any:
        try:
            if self.rows_alone and all(type(op) is _RowsOp for op in ops):
                # the common batch (completions and intents): the backend's one statement is
                # its own transaction, without BEGIN and COMMIT (one round trip to a server)
                self._write_rows(self._cursor(conn), ops)
                out = [None] * len(ops)
            else:
                cur = self._begin(conn)
                out = self._run_ops(cur, ops)
                self._commit(conn)
            self.transactions += 1
            return out
        except BaseException as exc:  # noqa: BLE001 - handed to the futures
            try:
                self._rollback(conn)
            except Exception:  # noqa: BLE001
                pass
            return exc

    def _run_ops(self, cur: Any, ops: list) -> list:
        """Run ``ops`` in queue order, each run of consecutive row operations merged into one
        :meth:`_write_rows` (group commit: one statement or ``executemany`` per table)."""
        out: list = []
        rows: list = []
        for op in ops:
            if type(op) is _RowsOp:
                rows.append(op)
                out.append(None)
                continue
            if rows:
                self._write_rows(cur, rows)
                rows = []
            out.append(op(cur))
        if rows:
            self._write_rows(cur, rows)
        return out

    def _deliver(self, batch: list, results: Any) -> None:
        notify: dict[Any, list] = {}
        for n, (_op, fut, note) in enumerate(batch):
            try:
                if isinstance(results, BaseException):
                    err = (results if isinstance(results, StoreError)
                           else StoreError(f"{type(results).__name__}: {results}"))
                    fut.set_exception(err)
                else:
                    fut.set_result(results[n])
            except InvalidStateError:
                # its waiter cancelled it (asyncio.wrap_future cancels the concurrent future
                # when the awaiting task is cancelled): the operation committed all the same,
                # and the writer thread must live on for everyone else's
                continue
            if note is not None:  # (loop, callback): one wake-up per loop and batch
                notify.setdefault(note[0], []).append((note[1], fut))
        for loop, callbacks in notify.items():
            try:
                loop.call_soon_threadsafe(_run_callbacks, callbacks)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

    def _migrate(self, conn: Any) -> None:
        cur = self._begin(conn)
        self._migrate_lock(cur)
        if not self.create:
            cur.execute(self.schema_exists_sql)
            if not cur.fetchone()[0]:
                self._rollback(conn)
                raise StoreNotFound(f"{display_url(self.url)} holds no run store: no runs were recorded there "
                                    "(its database has no sophon-dsl tables; 'sophon-dsl run --store URL' "
                                    "creates them)")
        cur.execute(self.sql("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                             "applied REAL NOT NULL)"))
        cur.execute(self.sql("SELECT MAX(version) FROM schema_migrations"))
        have = cur.fetchone()[0] or 0
        for version, statements in MIGRATIONS:
            if version > have:
                for stmt in statements:
                    cur.execute(self.sql(stmt))
                cur.execute(self.sql("INSERT INTO schema_migrations (version, applied) VALUES (?, ?)"),
                            (version, time.time()))
        self._commit(conn)

    # -- queueing -----------------------------------------------------------------------

    def submit(self, op: Op, notify: tuple | None = None) -> Future:
        """Queue ``op`` (run with a cursor in the next batch's transaction); ``notify`` is
        ``(loop, callback)``: ``callback(future)`` runs in that loop once it is committed."""
        fut: Future = Future()
        if self._closed:
            fut.set_exception(StoreError("the store is closed"))
            return fut
        self._queue.put((op, fut, notify))
        return fut

    def submit_rows(self, op: "_RowsOp", notify: tuple) -> "Landing":
        """:meth:`submit` for the per-call operations: a :class:`Landing` instead of a
        Future (no lock per operation: ``notify`` is how the caller learns the outcome)."""
        landing = Landing()
        if self._closed:
            landing.set_exception(StoreError("the store is closed"))
            loop, callback = notify
            loop.call_soon_threadsafe(callback, landing)
            return landing
        self._queue.put((op, landing, notify))
        return landing

    def _wait(self, op: Op) -> Any:
        return self.submit(op).result()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join(timeout=30)

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- backend hooks ------------------------------------------------------------------

    def sql(self, text: str) -> str:
        return text

    def _connect(self) -> Any:
        raise NotImplementedError

    def _begin(self, conn: Any) -> Any:
        raise NotImplementedError

    def _commit(self, conn: Any) -> None:
        conn.commit()

    def _rollback(self, conn: Any) -> None:
        conn.rollback()

    def _migrate_lock(self, cur: Any) -> None:
        pass

    # one row, one column: nonzero when the schema's version table exists (SQLite's catalogue;
    # the PostgreSQL store asks its own)
    schema_exists_sql = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"

    # a batch of row operations alone is written by _write_rows on a plain _cursor, without
    # _begin and _commit: the backend's rows go in one statement (PostgreSQL), which is atomic
    rows_alone = False

    def _cursor(self, conn: Any) -> Any:
        return conn.cursor()

    def _write_rows(self, cur: Any, ops: list) -> None:
        """Write the rows of these :class:`_RowsOp` inside the current transaction."""
        _RowsOp.run_merged(cur, ops)

    # -- operations (each one an ``op(cur)``) -------------------------------------------

    def schema_version(self) -> int:
        return self._wait(lambda cur: _one(cur, self.sql("SELECT MAX(version) FROM schema_migrations"))[0])

    def create_run(self, run_id: str, *, plan_id: str | None, goal: str | None, spec: dict, plan_hash: str,
                   entries: Iterable[tuple] = (), status: str = "running", owner: str | None = None,
                   lease_s: float = 60.0, plan_file: str | None = None, calls_total: int | None = None) -> Future:
        """Register a new run with its initial log entries (``(seq, entry dict)``) and, when
        ``owner`` is given, its lease."""
        spec_text, rows = dumps(spec), [(run_id, seq, dumps(e)) for seq, e in entries]
        last = max((r[1] for r in rows), default=-1)

        def op(cur: Any) -> None:
            now = time.time()
            cur.execute(self.sql("INSERT INTO runs (run_id, plan_id, goal, status, created, updated, plan_hash, "
                                 "spec, last_seq, lease_owner, lease_until, plan_file, calls_total) "
                                 "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"),
                        (run_id, plan_id, goal, status, now, now, plan_hash, spec_text, last, owner,
                         now + lease_s if owner else None, plan_file, calls_total))
            if rows:
                cur.executemany(self.sql("INSERT INTO log (run_id, seq, entry) VALUES (?,?,?)"), rows)

        return self.submit(op)

    def commit_call(self, run_id: str, entries: list[tuple], record: dict,
                    notify: tuple | None = None) -> Future:
        """One call's completion: its log entries ``(seq, entry dict)``, its record and the
        run's last sequence number, in one transaction (batched with others)."""
        rows = [(run_id, seq, dumps(e)) for seq, e in entries]
        op = _RowsOp(self._statements(), rows, [(run_id, record["id"], dumps(record))], ())
        return self.submit(op) if notify is None else self.submit_rows(op, notify)

    def put_intent(self, run_id: str, call_id: str, key: str, notify: tuple | None = None) -> Future:
        """The call is about to start its tool (committed before the tool runs)."""
        op = _RowsOp(self._statements(), (), (), [(run_id, call_id, key, time.time())])
        return self.submit(op) if notify is None else self.submit_rows(op, notify)

    def drop_intents(self, run_id: str, call_ids: list[str]) -> Future:
        """Forget the intents of calls whose tool never started (the run stopped first): a
        resume then runs them instead of finding them in doubt."""
        stmt = self.sql("DELETE FROM intents WHERE run_id = ? AND call_id = ?")
        rows = [(run_id, cid) for cid in call_ids]
        return self.submit(lambda cur: cur.executemany(stmt, rows) and None)

    def commit_rows(self, log: list, calls: list, intents: list, last: tuple, notify: tuple) -> "Landing":
        """What one run gathered in one pass of its event loop, already encoded: log rows
        ``(run_id, seq, text)`` in order, call records ``(run_id, call_id, text)``, intents
        ``(run_id, call_id, key, created)`` and ``last`` = ``(run_id, last seq)`` or ``()`` (for a
        backend that keeps the column: see ``last_seq_sql``);
        committed in one transaction (with whatever else the writer finds queued)."""
        return self.submit_rows(_RowsOp(self._statements(), log, calls, intents,
                                        ((last[1], last[0], last[1]),) if last else None), notify)

    def barrier(self) -> Future:
        """Done once every operation queued before it is done (the queue is run in order)."""
        return self.submit(lambda cur: None)

    def _statements(self) -> tuple[str, str, str, str]:
        st = self.__dict__.get("_stmts")
        if st is None:
            st = self._stmts = (
                self.sql("INSERT INTO log (run_id, seq, entry) VALUES (?,?,?)"),
                self.sql("INSERT INTO calls (run_id, call_id, record) VALUES (?,?,?) ON CONFLICT (run_id, call_id) "
                         "DO UPDATE SET record = excluded.record"),
                self.sql("INSERT INTO intents (run_id, call_id, idem_key, created) VALUES (?,?,?,?) "
                         "ON CONFLICT (run_id, call_id) DO NOTHING"),
                self.sql("UPDATE runs SET last_seq = ? WHERE run_id = ? AND last_seq < ?"))
        return st

    def put_attempts(self, run_id: str, call_id: str, attempts: list[dict]) -> Future:
        """The attempts so far of a call that is being retried (``Attempt.stored()`` each),
        replacing what was kept of it: what the dashboard shows before the call ends."""
        text = dumps(attempts)
        stmt = self.sql("INSERT INTO attempts (run_id, call_id, record) VALUES (?,?,?) ON CONFLICT (run_id, call_id) "
                        "DO UPDATE SET record = excluded.record")
        return self.submit(lambda cur: cur.execute(stmt, (run_id, call_id, text)) and None)

    def load_attempts(self, run_id: str) -> dict[str, list[dict]]:
        """:meth:`put_attempts`' records of the run, by call id."""
        stmt = self.sql("SELECT call_id, record FROM attempts WHERE run_id = ?")
        rows = self._wait(lambda cur: _all(cur, stmt, (run_id,)))
        return {cid: r for (cid, _), r in zip(rows, _decode_all([r for _, r in rows]))}

    def put_decision(self, run_id: str, name: str, decision: dict) -> Future:
        text = dumps(decision)
        stmt = self.sql("INSERT INTO decisions (run_id, name, decision) VALUES (?,?,?) ON CONFLICT (run_id, name) "
                        "DO UPDATE SET decision = excluded.decision")
        return self.submit(lambda cur: cur.execute(stmt, (run_id, name, text)) and None)

    def request_cancel(self, run_id: str, request: dict) -> Future:
        """Ask the process holding ``run_id`` to cancel it (``sophon-dsl cancel``, seed 000's
        ``TryCancelPlan``): kept as the run's decision named :data:`CANCEL_DECISION`, which the
        holder polls (:meth:`cancel_requested`); no schema change, as the trace id's row."""
        return self.put_decision(run_id, CANCEL_DECISION, request)

    def cancel_reader(self) -> "CancelReader":
        """What the process holding a run polls with (``durable.session.watch_cancel``): reads
        on a connection of its own, so polling adds no operation to the writer's queue and no
        transaction to its count."""
        return CancelReader(self, self.sql("SELECT decision FROM decisions WHERE run_id = ? AND name = ?"))

    def cancel_requested(self, run_id: str) -> dict | None:
        """The cancel request stored for ``run_id`` (None: nobody asked)."""
        stmt = self.sql("SELECT decision FROM decisions WHERE run_id = ? AND name = ?")
        row = self._wait(lambda cur: _one(cur, stmt, (run_id, CANCEL_DECISION)))
        return json.loads(row[0]) if row is not None else None

    def set_status(self, run_id: str, status: str, summary: dict | None = None) -> Future:
        text = dumps(summary) if summary is not None else None
        stmt = self.sql("UPDATE runs SET status = ?, updated = ?, summary = COALESCE(?, summary) WHERE run_id = ?")
        return self.submit(lambda cur: cur.execute(stmt, (status, time.time(), text, run_id)) and None)

    def set_spec(self, run_id: str, spec: dict, plan_hash: str) -> Future:
        text = dumps(spec)
        stmt = self.sql("UPDATE runs SET spec = ?, plan_hash = ? WHERE run_id = ?")
        return self.submit(lambda cur: cur.execute(stmt, (text, plan_hash, run_id)) and None)

    def acquire_lease(self, run_id: str, owner: str, lease_s: float = 60.0, stale: str | None = None) -> bool:
        """Take the run's lease unless another owner holds one that has not expired (``stale``:
        an owner known to be gone, whose lease may be taken at once)."""
        stmt = self.sql("UPDATE runs SET lease_owner = ?, lease_until = ? WHERE run_id = ? AND "
                        "(lease_owner IS NULL OR lease_owner = ? OR lease_owner = ? OR lease_until < ?)")

        def op(cur: Any) -> bool:
            now = time.time()
            cur.execute(stmt, (owner, now + lease_s, run_id, owner, stale or owner, now))
            return cur.rowcount == 1

        return self._wait(op)

    def release_lease(self, run_id: str, owner: str) -> Future:
        stmt = self.sql("UPDATE runs SET lease_owner = NULL, lease_until = NULL WHERE run_id = ? AND lease_owner = ?")
        return self.submit(lambda cur: cur.execute(stmt, (run_id, owner)) and None)

    # how a run's row reads its last committed sequence number: the column, which every
    # commit updates (a backend that does not update it reads the log's own maximum)
    last_seq_sql = "last_seq"

    def _run_columns(self, names: Iterable[str]) -> str:
        return ", ".join(self.last_seq_sql if c == "last_seq" else c for c in names)

    def get_run(self, run_id: str) -> dict | None:
        stmt = self.sql(f"SELECT {self._run_columns(_RUN_COLUMNS)} FROM runs WHERE run_id = ?")
        row = self._wait(lambda cur: _one(cur, stmt, (run_id,)))
        return _run_row(row) if row is not None else None

    def get_run_head(self, run_id: str) -> dict | None:
        """The run's row without its spec (the plan text, large for a large plan): what the
        dashboard polls while it watches a run."""
        names = [c for c in _RUN_COLUMNS if c != "spec"]
        stmt = self.sql(f"SELECT {', '.join(names)} FROM runs WHERE run_id = ?")
        row = self._wait(lambda cur: _one(cur, stmt, (run_id,)))
        return _run_row(row, names) if row is not None else None

    def list_runs(self, status: str | None = None, limit: int | None = None) -> list[dict]:
        cols = self._run_columns(c for c in _RUN_COLUMNS if c != "spec")
        where, params = ("WHERE status = ?", (status,)) if status else ("", ())
        stmt = self.sql(f"SELECT {cols} FROM runs {where} ORDER BY created DESC"
                        + (f" LIMIT {int(limit)}" if limit else ""))
        rows = self._wait(lambda cur: _all(cur, stmt, params))
        names = [c for c in _RUN_COLUMNS if c != "spec"]
        return [_run_row(r, names) for r in rows]

    def count_calls(self, run_ids: Iterable[str]) -> dict[str, int]:
        """The number of calls recorded (ended) per run, for ``runs list``."""
        ids = list(run_ids)
        if not ids:
            return {}
        out: dict[str, int] = {}
        for k in range(0, len(ids), 500):  # (bounded IN lists)
            part = ids[k:k + 500]
            stmt = self.sql(f"SELECT run_id, COUNT(*) FROM calls WHERE run_id IN ({', '.join('?' * len(part))}) "
                            "GROUP BY run_id")
            out.update(dict(self._wait(lambda cur, stmt=stmt, part=part: _all(cur, stmt, tuple(part)))))
        return out

    def delete_runs(self, run_ids: Iterable[str]) -> list[str]:
        """Delete each run with everything recorded for it (log, calls, intents, decisions,
        replies, attempts) and its sub-runs (an agent's turns, ``RUN_ID/t1``...), in one transaction;
        returns the ids of the runs that existed.  A run whose lease another process holds
        (running now) is not deleted: a ``StoreError`` names it and nothing is deleted."""
        ids = list(dict.fromkeys(run_ids))
        tables = ("log", "calls", "intents", "decisions", "agent_replies", "attempts", "runs")
        # a sub-run's id starts with its run's id and "/" (substr: no LIKE escaping needed)
        kids = self.sql("SELECT run_id FROM runs WHERE substr(run_id, 1, ?) = ?")
        found = self.sql("SELECT run_id, status, lease_owner, lease_until FROM runs WHERE run_id = ?")

        def op(cur: Any) -> list[str]:
            now = time.time()
            gone: list[str] = []
            doomed: list[str] = []
            for rid in ids:
                row = _one(cur, found, (rid,))
                if row is None:
                    continue
                if row[2] is not None and row[3] is not None and row[3] >= now:
                    raise StoreError(f"run {rid} is running (its lease is held until "
                                     f"{time.strftime('%H:%M:%S', time.localtime(row[3]))}): not deleted")
                gone.append(rid)
                doomed.append(rid)
                doomed.extend(r[0] for r in _all(cur, kids, (len(rid) + 1, rid + "/")))
            for table in tables:
                stmt = self.sql(f"DELETE FROM {table} WHERE run_id = ?")
                cur.executemany(stmt, [(r,) for r in doomed])
            return gone

        return self._wait(op)

    def prune_runs(self, older_than_s: float, status: str | None = None) -> list[str]:
        """Delete the runs last updated more than ``older_than_s`` seconds ago: those with
        ``status``, else every finished one (not running, not waiting); returns their ids."""
        if status:
            where, params = "status = ?", (status,)
        else:
            where, params = "status NOT IN ('running', 'waiting')", ()
        stmt = self.sql(f"SELECT run_id FROM runs WHERE {where} AND updated < ?")
        rows = self._wait(lambda cur: _all(cur, stmt, (*params, time.time() - older_than_s)))
        # sub-runs (RUN_ID/t1) go with their run (delete_runs), never on their own
        ids = [r[0] for r in rows if "/" not in r[0]]
        return self.delete_runs(ids) if ids else []

    def load_log(self, run_id: str) -> list[dict]:
        """The committed log, oldest first (each entry with its ``seq``)."""
        stmt = self.sql("SELECT seq, entry FROM log WHERE run_id = ? ORDER BY seq")
        rows = self._wait(lambda cur: _all(cur, stmt, (run_id,)))
        return [_entry(seq, e) for (seq, _), e in zip(rows, _decode_all([e for _, e in rows]))]

    def load_calls(self, run_id: str) -> dict[str, dict]:
        stmt = self.sql("SELECT call_id, record FROM calls WHERE run_id = ?")
        rows = self._wait(lambda cur: _all(cur, stmt, (run_id,)))
        return {cid: r for (cid, _), r in zip(rows, _decode_all([r for _, r in rows]))}

    def load_intents(self, run_id: str) -> dict[str, str]:
        stmt = self.sql("SELECT call_id, idem_key FROM intents WHERE run_id = ?")
        return dict(self._wait(lambda cur: _all(cur, stmt, (run_id,))))

    def load_decisions(self, run_id: str) -> dict[str, dict]:
        stmt = self.sql("SELECT name, decision FROM decisions WHERE run_id = ?")
        return {n: json.loads(d) for n, d in self._wait(lambda cur: _all(cur, stmt, (run_id,)))}

    def put_chain(self, name: str, definition: dict) -> Future:
        """Keep (or replace) the tool chain ``name`` (``{name, description, steps}``)."""
        text = dumps(definition)
        stmt = self.sql("INSERT INTO chains (name, definition, created, updated) VALUES (?,?,?,?) ON CONFLICT (name) "
                        "DO UPDATE SET definition = excluded.definition, updated = excluded.updated")

        def op(cur: Any) -> None:
            now = time.time()
            cur.execute(stmt, (name, text, now, now))

        return self.submit(op)

    def load_chains(self) -> list[dict]:
        """Every kept tool chain, in the order they were first kept (a chain may use an earlier one)."""
        stmt = self.sql("SELECT definition FROM chains ORDER BY created, name")
        return [json.loads(d) for (d,) in self._wait(lambda cur: _all(cur, stmt, ()))]

    def append_reply(self, run_id: str, turn: int, seq: int, text: str, final: bool = False) -> Future:
        """A piece of turn ``turn``'s reply (``final``: the reply is complete), queued: it is
        committed before anything queued after it (an intent, a call's completion)."""
        stmt = self.sql("INSERT INTO agent_replies (run_id, turn, seq, text, final) VALUES (?,?,?,?,?) "
                        "ON CONFLICT (run_id, turn, seq) DO NOTHING")
        return self.submit(lambda cur: cur.execute(stmt, (run_id, turn, seq, text, int(final))) and None)

    def load_replies(self, run_id: str) -> dict[int, tuple[str, bool]]:
        """Each recorded turn's reply text and whether it was complete."""
        stmt = self.sql("SELECT turn, text, final FROM agent_replies WHERE run_id = ? ORDER BY turn, seq")
        parts: dict[int, list[str]] = {}
        done: set[int] = set()
        for turn, text, final in self._wait(lambda cur: _all(cur, stmt, (run_id,))):
            parts.setdefault(turn, []).append(text)
            if final:
                done.add(turn)
        return {turn: ("".join(texts), turn in done) for turn, texts in parts.items()}


class Landing:
    """The outcome of a per-call operation, set by the writer thread before the caller is
    notified (see :meth:`RunStore.submit_rows`)."""

    __slots__ = ("_done", "_exc")

    def __init__(self) -> None:
        self._done = False
        self._exc: BaseException | None = None

    def set_result(self, _value: Any) -> None:
        self._done = True

    def set_exception(self, exc: BaseException) -> None:
        self._exc = exc
        self._done = True

    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        return self._exc


class _RowsOp:
    """Rows to insert (log entries, call records, intents): the common operations, which a
    batch merges into one ``executemany`` per statement."""

    __slots__ = ("stmts", "log", "calls", "intents", "last")

    def __init__(self, stmts: tuple, log: Any, calls: Any, intents: Any, last: Any = None) -> None:
        # last: the ``set_last`` parameters when the caller knows them (else found from ``log``)
        self.stmts, self.log, self.calls, self.intents, self.last = stmts, log, calls, intents, last

    def __call__(self, cur: Any) -> None:
        self.run_merged(cur, [self])

    @staticmethod
    def run_merged(cur: Any, ops: list) -> None:
        add_log, add_call, add_intent, set_last = ops[0].stmts
        one = ops[0] if len(ops) == 1 else None
        log = one.log if one is not None else [r for op in ops for r in op.log]
        if log:
            cur.executemany(add_log, log)
            cur.executemany(set_last, _last_seqs(ops))
        calls = one.calls if one is not None else [r for op in ops for r in op.calls]
        if calls:
            cur.executemany(add_call, calls)
        intents = one.intents if one is not None else [r for op in ops for r in op.intents]
        if intents:
            cur.executemany(add_intent, intents)


def merged_rows(ops: list) -> tuple[list, dict, list]:
    """The rows of these row operations together (for a backend's :meth:`RunStore._write_rows`):
    log rows, call records by ``(run_id, call_id)`` (the last one of a call wins, as a second
    upsert would) and intents."""
    log = [r for op in ops for r in op.log]
    calls = {(r[0], r[1]): r[2] for op in ops for r in op.calls}
    intents = [r for op in ops for r in op.intents]
    return log, calls, intents


def _last_seqs(ops: list) -> list[tuple]:
    """``set_last`` parameters: each run's highest sequence number among ``ops``' log rows."""
    last: dict[str, int] = {}
    for op in ops:
        if op.last is not None:
            for seq, run_id, _ in op.last:
                if seq > last.get(run_id, -1):
                    last[run_id] = seq
            continue
        for run_id, seq, _ in op.log:
            if seq > last.get(run_id, -1):
                last[run_id] = seq
    return [(seq, run_id, seq) for run_id, seq in last.items()]


def _decode_all(texts: list[str]) -> list:
    """Stored JSON texts decoded with one ``json.loads`` (a resume reads one per call)."""
    return json.loads(f"[{','.join(texts)}]") if texts else []


def _entry(seq: int, e: Any) -> dict:
    """A stored log entry (``[kind, path, value, method, call, date]``, or a dict) as a dict."""
    if type(e) is list:
        kind, path, value, method, call, date = e
        return {"seq": seq, "kind": kind, "path": path, "value": value, "method": method, "call": call, "date": date}
    return {"seq": seq, **e}


def _run_callbacks(callbacks: list) -> None:
    for cb, fut in callbacks:
        cb(fut)


def _one(cur: Any, stmt: str, params: tuple = ()) -> Any:
    cur.execute(stmt, params)
    return cur.fetchone()


def _all(cur: Any, stmt: str, params: tuple = ()) -> list:
    cur.execute(stmt, params)
    return list(cur.fetchall())


def _run_row(row: Any, names: Iterable[str] = _RUN_COLUMNS) -> dict:
    out = dict(zip(names, row))
    for key in ("spec", "summary"):
        if out.get(key) is not None:
            out[key] = json.loads(out[key])
    return out
