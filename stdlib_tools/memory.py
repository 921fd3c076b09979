"""Memory tools on SQLite FTS5: ``memory.write`` and ``memory.search`` (seed 002 always
offers memory.search).  One :class:`MemoryStore` per built set of tools, opened on first
use at ``StdlibConfig.memory_db_path`` (by default a per-user file, so what one run
writes the next one finds)."""

from __future__ import annotations

import datetime as _dt
import json
import re
import sqlite3
import threading
from typing import Annotated, Any

from typing_extensions import TypedDict

from sophon_dsl.model import Risk
from sophon_dsl.private import private_sqlite_file
from sophon_dsl.tools import ToolSpec

from ._common import Field, make_tool
from .config import StdlibConfig, uses_config
from .errors import ToolError

__all__ = ["MemoryStore", "build", "MemoryRecord", "WriteReceipt", "SearchResult"]

_WORD = re.compile(r"\w+", re.UNICODE)


class WriteReceipt(TypedDict):
    id: int
    created_at: str


class MemoryRecord(TypedDict):
    id: int
    text: str
    tags: list[str]
    metadata: dict[str, Any]
    created_at: str
    score: float


class SearchResult(TypedDict):
    results: list[MemoryRecord]


class MemoryStore:
    """A small full-text memory: rows of (text, tags, metadata) in an FTS5 table."""

    def __init__(self, path: str = ":memory:", busy_timeout: float = 10.0):
        self.path = path
        self._lock = threading.Lock()
        try:
            if str(path) != ":memory:" and not str(path).startswith("file:"):
                # memories are the user's data: private (0700 / 0600), a warning if not
                private_sqlite_file(path)
            # another process writing the same file: wait for it (busy timeout), then a
            # named error instead of sqlite's raw "database is locked"
            self._conn = sqlite3.connect(path, check_same_thread=False, timeout=busy_timeout)
            self._conn.executescript(
                """
                CREATE TABLE IF NOT EXISTS memories (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    text TEXT NOT NULL, tags TEXT NOT NULL DEFAULT '',
                    metadata TEXT NOT NULL DEFAULT '{}', created_at TEXT NOT NULL);
                CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
                    text, tags, content='memories', content_rowid='id', tokenize='porter unicode61');
                CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
                    INSERT INTO memories_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
                END;
                """)
        except (sqlite3.Error, OSError) as exc:
            raise ToolError("Memory.Unavailable", f"cannot open memory database {path!r}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def write(self, text: str, tags: list[str] | None = None,
              metadata: dict[str, Any] | None = None) -> WriteReceipt:
        if not str(text).strip():
            raise ToolError("Memory.InvalidArgument", "text is empty")
        created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        clean = [str(t).strip() for t in (tags or []) if str(t).strip()]
        if any(len(t.split()) > 1 for t in clean):  # tags are stored space-separated
            raise ToolError("Memory.InvalidArgument", "a tag cannot hold whitespace")
        tag_text = " ".join(clean)
        try:
            with self._lock, self._conn:
                cur = self._conn.execute(
                    "INSERT INTO memories(text, tags, metadata, created_at) VALUES (?, ?, ?, ?)",
                    (str(text), tag_text, json.dumps(metadata or {}), created))
        except sqlite3.OperationalError as exc:
            raise _store_error(self.path, exc) from None
        return WriteReceipt(id=int(cur.lastrowid or 0), created_at=created)

    def search(self, query: str, limit: int = 5, tags: list[str] | None = None,
               raw: bool = False) -> SearchResult:
        limit = max(1, min(int(limit), 100))
        if raw:
            match = query
        else:
            words = _WORD.findall(str(query))
            match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        params: list[Any] = []
        where = []
        if match:
            where.append("memories_fts MATCH ?")
            params.append(match)
        for t in tags or []:  # a tag matches exactly: never stemmed, never a part of another
            where.append("instr(' ' || m.tags || ' ', ?) > 0")
            params.append(" " + str(t).strip() + " ")
        sql = ("SELECT m.id, m.text, m.tags, m.metadata, m.created_at, "
               + ("bm25(memories_fts)" if match else "0.0")
               + " FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
               + (" WHERE " + " AND ".join(where) if where else "")
               + (" ORDER BY bm25(memories_fts), m.id DESC" if match else " ORDER BY m.id DESC")
               + " LIMIT ?")
        params.append(limit)
        try:
            with self._lock:
                rows = self._conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                raise _store_error(self.path, exc) from None
            raise ToolError("Memory.InvalidQuery", f"invalid search query {query!r}: {exc}") from None
        return SearchResult(results=[
            MemoryRecord(id=r[0], text=r[1], tags=r[2].split() if r[2] else [],
                         metadata=json.loads(r[3]), created_at=r[4], score=float(-r[5]) or 0.0)
            for r in rows])


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _store_error(path: str, exc: sqlite3.OperationalError) -> ToolError:
    if _busy(exc):
        return ToolError("Memory.Busy", f"the memory database {path!r} stayed locked by another "
                         "writer past the busy timeout")
    return ToolError("Memory.Unavailable", f"memory database {path!r}: {exc}")


@uses_config("memory_db_path", "memory_busy_timeout")
def build(config: StdlibConfig, store: MemoryStore | None = None) -> list[ToolSpec]:
    holder: dict[str, MemoryStore] = {}
    opening = threading.Lock()  # memory calls run in worker threads: open the store once

    def get_store() -> MemoryStore:  # opened on first use
        if store is not None:
            return store
        with opening:
            if "s" not in holder:
                holder["s"] = MemoryStore(config.memory_db_path, config.memory_busy_timeout)
            return holder["s"]

    def write(text: Annotated[str, Field(description="what to remember")],
              tags: list[str] | None = None,
              metadata: dict[str, Any] | None = None) -> WriteReceipt:
        return get_store().write(text, tags, metadata)

    def search(query: Annotated[str, Field(description="words to look for (any of them); "
                                           "empty returns the latest memories")],
               limit: Annotated[int, Field(ge=1, le=100)] = 5,
               tags: Annotated[list[str] | None, Field(description="only memories with all these tags")] = None,
               ) -> SearchResult:
        return get_store().search(query, limit, tags)

    # placement="local": the store is this process's (one SQLite file, opened once, behind a
    # lock that cannot be pickled); on a Dask worker the memories would land in another file,
    # on another machine, so a routed memory call would be refused (E704) or remember nothing
    return [
        make_tool(write, "memory.write", Risk.LOW,
                  "Remember a piece of text (with optional tags and metadata) for later searches.",
                  placement="local"),
        make_tool(search, "memory.search", Risk.NONE,
                  "Full-text search of remembered texts (SQLite FTS5, best matches first).",
                  placement="local"),
    ]
