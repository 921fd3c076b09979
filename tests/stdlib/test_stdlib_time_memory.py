"""datetime.now, time.sleep and memory.write / memory.search (SQLite FTS5)."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from stdlib_tools import MemoryStore, StdlibConfig
from stdlib_tools.errors import ToolError

from stdlib_helpers import run, tools_by_name


def test_datetime_now_with_timezone():
    t = tools_by_name(StdlibConfig(), ["time"])
    out = t["datetime.now"](timezone="Asia/Tokyo")
    assert out["timezone"] == "Asia/Tokyo" and out["utc_offset"] == "+09:00"
    parsed = dt.datetime.fromisoformat(out["iso"])
    assert abs(parsed.timestamp() - time.time()) < 5 and abs(out["unix"] - time.time()) < 5
    assert out["date"] == parsed.date().isoformat() and out["weekday"] == parsed.strftime("%A")
    assert t["datetime.now"](timezone="UTC")["utc_offset"] == "+00:00"
    local = t["datetime.now"]()
    assert dt.datetime.fromisoformat(local["iso"]).tzinfo is not None
    with pytest.raises(ToolError) as err:
        t["datetime.now"](timezone="Mars/Olympus")
    assert err.value.code == "Time.UnknownTimezone"


def test_sleep_is_bounded():
    t = tools_by_name(StdlibConfig(max_sleep=1), ["time"])
    start = time.monotonic()
    assert run(t["time.sleep"](seconds=0.05)) == {"slept": 0.05}
    assert time.monotonic() - start >= 0.04
    for bad, code in ((5, "Time.TooLong"), (-1, "Time.InvalidArgument")):
        with pytest.raises(ToolError) as err:
            run(t["time.sleep"](seconds=bad))
        assert err.value.code == code


def test_memory_write_and_search():
    t = tools_by_name(StdlibConfig(), ["memory"])
    a = t["memory.write"](text="Acme charges 10 USD per seat", tags=["pricing", "acme"],
                          metadata={"source": "https://acme.example"})
    t["memory.write"](text="Globex is headquartered in Springfield", tags=["globex"])
    t["memory.write"](text="The weather was sunny", tags=["misc"])
    assert a["id"] == 1 and a["created_at"]
    hits = t["memory.search"](query="What's Acme's price per seat?")["results"]
    assert hits[0]["id"] == 1 and hits[0]["metadata"] == {"source": "https://acme.example"}
    assert hits[0]["tags"] == ["pricing", "acme"] and hits[0]["score"] > 0
    # stemming: "charging" finds "charges"
    assert [r["id"] for r in t["memory.search"](query="charging")["results"]] == [1]
    assert [r["id"] for r in t["memory.search"](query="springfield OR sunny", tags=["globex"])
            ["results"]] == [2]
    assert t["memory.search"](query="nothing-matches-this")["results"] == []
    latest = t["memory.search"](query="", limit=2)["results"]
    assert [r["id"] for r in latest] == [3, 2]
    # FTS syntax in a query is plain text, not an error
    assert t["memory.search"](query='"unbalanced AND (NEAR OR')["results"] == []
    with pytest.raises(ToolError) as err:
        t["memory.write"](text="   ")
    assert err.value.code == "Memory.InvalidArgument"


def test_memory_is_per_config_and_file_backed(tmp_path):
    t1 = tools_by_name(StdlibConfig(memory_db_path=":memory:"), ["memory"])
    t2 = tools_by_name(StdlibConfig(memory_db_path=":memory:"), ["memory"])
    t1["memory.write"](text="only in the first store")
    assert t2["memory.search"](query="first")["results"] == []
    db = tmp_path / "mem.sqlite"
    t3 = tools_by_name(StdlibConfig(memory_db_path=str(db)), ["memory"])
    t3["memory.write"](text="persisted across instances")
    t4 = tools_by_name(StdlibConfig(memory_db_path=str(db)), ["memory"])
    assert [r["text"] for r in t4["memory.search"](query="persisted")["results"]] == \
        ["persisted across instances"]


def test_memory_store_from_threads():
    import concurrent.futures as cf

    store = MemoryStore()
    with cf.ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda i: store.write(f"note number {i}"), range(40)))
    assert len(store.search("note", limit=100)["results"]) == 40
