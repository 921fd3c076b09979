"""The dashboard's JSON API, pages and safety without a browser (issue 29 items 5, 6, 8)."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from sophon_dsl.durable import open_store
from sophon_dsl.ui.app import esc, make_app

from .helpers import cli, make_plan


@pytest.fixture
def store_with_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    plan = make_plan(tmp_path, "p.plan", 'goal = "<b>bold</b> goal"\n†state.h = hostile(x="\\u202eevil")\n')
    ok = cli("run", str(plan), "--tools", "tools.py", "--store", url, "--json", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    risky = make_plan(tmp_path, "r.plan", '†state.s = send(to="bob")\n')
    wait = cli("run", str(risky), "--tools", "tools.py", "--store", url, "--approve", "wait", "--json", cwd=tmp_path)
    assert wait.returncode == 3, wait.stderr  # left waiting for a person
    yield url, json.loads(ok.stdout)["run_id"], json.loads(wait.stdout)["run_id"]


def client(url, token=None):
    store = open_store(url)
    return TestClient(make_app(store, url, token), base_url="http://127.0.0.1:8765"), store


def test_api_shapes_match_runs_show(store_with_runs, tmp_path):
    url, ok_id, wait_id = store_with_runs
    c, store = client(url)
    try:
        runs = c.get("/api/runs").json()
        assert runs["total"] == 2 and [r["run_id"] for r in runs["runs"]] == [wait_id, ok_id]  # newest first
        assert runs["runs"][1]["calls"] == {"succeeded": 1}
        assert c.get("/api/runs", params={"status": "waiting"}).json()["total"] == 1
        assert c.get("/api/runs", params={"q": "BOLD"}).json()["runs"][0]["run_id"] == ok_id
        assert c.get("/api/runs", params={"limit": "x"}).status_code == 400
        shown = cli("runs", "show", ok_id, "--store", url, "--json", cwd=tmp_path)
        assert c.get(f"/api/runs/{ok_id}").json() == json.loads(shown.stdout)
        assert c.get("/api/runs/nope").status_code == 404
        assert c.get(f"/api/runs/{wait_id}").json()["waiting"]["calls"][0]["tool"] == "send"
    finally:
        store.close()


def test_pages_escape_hostile_values(store_with_runs):
    url, ok_id, _ = store_with_runs
    c, store = client(url)
    try:
        page = c.get("/").text
        assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt; goal" in page
        run = c.get(f"/runs/{ok_id}")
        assert "'self'" in run.headers["content-security-policy"] and "script-src 'self'" in run.headers[
            "content-security-policy"]
        assert run.text.count("<script") == 1  # the package's own app.js only
        assert "\u202e" not in run.text
        detail = c.get(f"/api/runs/{ok_id}/calls/c1").json()  # JSON for the page's textContent
        assert detail["writes"][0]["value"]["link"] == "javascript:alert(document.cookie)"
        assert 'href="javascript' not in run.text
        assert esc("<a href='javascript:x'>\u2066") == "&lt;a href=&#x27;javascript:x&#x27;&gt;\\u2066"
    finally:
        store.close()


def test_token_and_csrf(store_with_runs):
    url, ok_id, wait_id = store_with_runs
    c, store = client(url, token="s3cret")
    try:
        assert c.get("/").status_code == 401 and c.get("/api/runs").status_code == 401
        assert c.get("/static/app.js").status_code == 401
        assert c.get("/api/runs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        r = c.get("/?token=s3cret", follow_redirects=False)
        assert r.status_code == 303 and "sophon_ui_token=s3cret" in r.headers["set-cookie"]
        assert "HttpOnly" in r.headers["set-cookie"] and "strict" in r.headers["set-cookie"].lower()
        c.cookies.set("sophon_ui_token", "s3cret")
        assert c.get("/").status_code == 200
        csrf = c.get("/api/csrf").json()["csrf"]
        # no CSRF token, a wrong one, another origin: refused, nothing stored
        assert c.post(f"/api/runs/{wait_id}/approve").status_code == 403
        assert c.post(f"/api/runs/{wait_id}/approve", headers={"X-CSRF-Token": "x"}).status_code == 403
        assert c.post(f"/api/runs/{wait_id}/approve", headers={"X-CSRF-Token": csrf,
                                                               "Origin": "http://evil.example"}).status_code == 403
        assert c.get(f"/api/runs/{wait_id}/approve").status_code == 405
        assert store.load_decisions(wait_id) == {}
        # a run that is not waiting
        assert c.post(f"/api/runs/{ok_id}/approve", headers={"X-CSRF-Token": csrf}).status_code == 409
    finally:
        store.close()


def test_cli_refuses_a_missing_store_and_an_open_host_without_token(tmp_path):
    proc = cli("ui", "--store", f"sqlite:///{tmp_path / 'none.db'}", cwd=tmp_path)
    assert proc.returncode == 2 and "no run store" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "none.db").exists()
    proc = cli("ui", "--store", f"sqlite:///{tmp_path / 'none.db'}", "--host", "0.0.0.0", cwd=tmp_path)
    assert proc.returncode == 2 and "--token" in proc.stderr
    proc = cli("ui", "--store", "ftp://x", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def _tables(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [r[0] for r in conn.execute("SELECT tablename FROM pg_catalog.pg_tables "
                                           "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")]


def test_cli_refuses_a_postgres_database_without_runs_and_creates_nothing(pg_cluster, tmp_path):
    """The dashboard reads: an empty PostgreSQL database is an error (exit 2, Store.NotFound,
    the URL without its password), not given the run schema."""
    empty = pg_cluster.new_database()
    with_password = empty.replace("postgresql://postgres@", "postgresql://postgres:s3cret-pw@")
    proc = cli("ui", "--store", with_password, "--port", "0", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Store.NotFound" in proc.stderr and "no runs were recorded there" in proc.stderr
    assert with_password.replace("s3cret-pw", "***") in proc.stderr and "s3cret-pw" not in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _tables(empty) == []
    # the other readers refuse it the same way (`runs list` answered "no runs" before)
    proc = cli("runs", "list", "--store", empty, cwd=tmp_path)
    assert proc.returncode == 2 and "Store.NotFound" in proc.stderr and _tables(empty) == []
    # once a run is recorded there, the dashboard serves it
    plan = make_plan(tmp_path, "p.plan", '†state.e = echo(x="hi")\n')
    assert cli("run", str(plan), "--tools", "tools.py", "--store", empty, cwd=tmp_path).returncode == 0
    assert "runs" in _tables(empty)
    assert cli("runs", "list", "--store", empty, cwd=tmp_path).returncode == 0


def test_cli_refuses_a_sqlite_file_that_holds_no_store(tmp_path):
    """An existing SQLite file without the store's tables (a wrong file): Store.NotFound, left
    as it was."""
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (t TEXT)")
    proc = cli("ui", "--store", f"sqlite:///{path}", "--port", "0", cwd=tmp_path)
    assert proc.returncode == 2 and "Store.NotFound" in proc.stderr and "Traceback" not in proc.stderr
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["notes"]
