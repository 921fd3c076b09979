"""The dashboard at scale (issue 29 item 8): a 10,000-call plan's graph stays small (wide
layers and large fan-ins collapsed), live updates send what changed, several runs update at
once, and the pages work over a PostgreSQL store.  Page load time of a 10,000-call run in a
browser is measured by benchmarks/bench_ui.py (docs/performance.md), not asserted here."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request

import pytest
from starlette.testclient import TestClient

from sophon_dsl import loader
from sophon_dsl.durable import open_store
from sophon_dsl.ui import data
from sophon_dsl.ui.app import _dag, make_app

from .helpers import cli, make_plan, start_ui, stop, wait_status


def _big_plan(n: int) -> str:
    lines = [f'†state.r.k{i} = echo(x="{i}")' for i in range(n - 2)]
    lines.append("†state.n = count(xs=†state.r)")
    lines.append("†state.m = map(†input.items, as=it) {\n    †local.e = echo(x=†it)\n}")
    return "\n".join(lines) + "\n"


def test_a_10000_call_plans_graph_collapses_wide_layers_and_fan_ins():
    plan = loader.loads(_big_plan(10_000))
    pv = data.plan_view({"spec": {"plan": loader.dumps(plan, "json")}})
    assert len(pv["ids"]) == 10_000 and pv["layers"] == 2
    # layer 0 holds 9,999 calls: MAX_LAYER drawn, the rest one "+N more" node
    assert len(pv["nodes"]) == data.MAX_LAYER + 1  # + the fan-in call of layer 1
    (more,) = pv["hidden"]
    assert more["more"] == 9_999 - data.MAX_LAYER and more["layer"] == 0
    # the fan-in reads 9,998 calls: one edge per drawn one, one from "+N more" for the rest
    into = [a for a, b in pv["edges"] if b == "c9999"]
    assert len(into) == data.MAX_LAYER + 1 and more["id"] in into
    svg = _dag(pv, {"calls": {}, "maps": {}})
    assert svg.count("<g class=\"node") == data.MAX_LAYER + 2 and svg.count("<line") == len(pv["edges"])
    assert 'data-map-of="c10000"' not in svg  # the map is past the cut of its layer


def test_snapshot_changes_sends_the_whole_snapshot_once_then_what_changed():
    first = {"status": "running", "calls": {"c1": "running", "c2": "pending"}, "maps": {}}
    assert data.snapshot_changes(None, first) is first
    assert data.snapshot_changes(first, dict(first)) is None
    later = {"status": "running", "calls": {"c1": "succeeded", "c2": "pending"}, "maps": {"c2": {"running": 1}}}
    assert data.snapshot_changes(first, later) == {**later, "calls": {"c1": "succeeded"}, "partial": True}


def _frames(client, run_id: str, want: int) -> list[dict]:
    frames = []
    with client.stream("GET", f"/api/runs/{run_id}/events") as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                frames.append(json.loads(line[6:]))
                if len(frames) >= want:
                    break
    return frames


def test_several_runs_update_at_once(tmp_path):
    """Three runs in three processes write one store while the dashboard watches all of them:
    each page's event stream sees its own run go from running to succeeded."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    runners, releases = [], []
    for k in range(3):
        release = tmp_path / f"release{k}"
        plan = make_plan(tmp_path, f"p{k}.plan", f'goal = "run {k}"\n†state.a = wait_for(path="{release}")\n'
                                                 f'†state.b = echo(x=†state.a)\n')
        runners.append(cli("run", str(plan), "--tools", "tools.py", "--store", url, "--json", cwd=tmp_path,
                           background=True))
        releases.append(release)
    server = None
    try:
        # every run recorded, its first call started (an intent in the store)
        store = open_store(url)
        try:
            deadline = time.monotonic() + 60
            ids: set = set()
            while time.monotonic() < deadline:
                ids = {r["run_id"] for r in store.list_runs(status="running")}
                if len(ids) == 3 and all(store.load_intents(r) for r in ids):
                    break
                time.sleep(0.1)
        finally:
            store.close()
        assert len(ids) == 3
        server, base = start_ui(url, tmp_path)
        seen: dict[str, list] = {}

        def watch(run_id: str) -> None:
            with urllib.request.urlopen(f"{base}/api/runs/{run_id}/events", timeout=60) as r:
                for raw in r:
                    line = raw.decode("utf-8").rstrip("\n")
                    if line.startswith("data: "):
                        frame = json.loads(line[6:])
                        seen.setdefault(run_id, []).append(frame)
                        if frame["status"] == "succeeded":
                            return

        threads = [threading.Thread(target=watch, args=(r,), daemon=True) for r in sorted(ids)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(seen) < 3:
            time.sleep(0.05)
        for release in releases:
            release.write_text("go")
        for t in threads:
            t.join(timeout=90)
        for run_id in ids:
            frames = seen[run_id]
            assert frames[0]["calls"] == {"c1": "running", "c2": "pending"} and "partial" not in frames[0]
            assert frames[-1]["status"] == "succeeded"
            merged: dict = {}
            for f in frames:
                merged.update(f["calls"])
            assert merged == {"c1": "succeeded", "c2": "succeeded"}
        for r in runners:
            assert r.wait(timeout=60) == 0
        listed = json.loads(cli("runs", "list", "--store", url, "--json", cwd=tmp_path).stdout)
        assert sorted(r["status"] for r in listed) == ["succeeded"] * 3
    finally:
        for release in releases:
            release.write_text("go")
        for r in runners:
            stop(r)
        if server is not None:
            stop(server)


@pytest.fixture(scope="module")
def pg_cluster():
    from durable.pgcluster import Cluster

    cluster = Cluster().start()
    yield cluster
    cluster.stop()


def test_the_dashboard_over_a_postgresql_store(pg_cluster, tmp_path):
    url = pg_cluster.new_database()
    plan = make_plan(tmp_path, "pg.plan", 'goal = "<b>pg</b>"\n†state.h = hostile(x="a")\n'
                                          '†state.m = map(†input.xs, as=it) {\n    †local.e = echo(x=†it)\n}\n')
    (tmp_path / "in.json").write_text('{"xs": ["p", "q", "r"]}', encoding="utf-8")
    done = cli("run", str(plan), "--tools", "tools.py", "--input", "@in.json", "--store", url, "--json",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    risky = make_plan(tmp_path, "r.plan", '†state.s = send(to="bob")\n†state.t = echo(x=†state.s)\n')
    wait = cli("run", str(risky), "--tools", "tools.py", "--store", url, "--approve", "wait", "--json", cwd=tmp_path)
    assert wait.returncode == 3, wait.stderr
    wait_id = json.loads(wait.stdout)["run_id"]
    store = open_store(url)
    try:
        c = TestClient(make_app(store, url), base_url="http://127.0.0.1:8765")
        runs = c.get("/api/runs").json()
        assert [r["run_id"] for r in runs["runs"]] == [wait_id, run_id]
        assert runs["runs"][1]["calls"] == {"succeeded": 5} and runs["runs"][1]["file"].endswith("pg.plan")
        shown = cli("runs", "show", run_id, "--store", url, "--json", cwd=tmp_path)
        assert c.get(f"/api/runs/{run_id}").json() == json.loads(shown.stdout)
        page = c.get(f"/runs/{run_id}").text
        assert "&lt;b&gt;pg&lt;/b&gt;" in page and "<b>pg</b>" not in page
        assert re.search(r'data-map-of="c2">items: 3 succeeded<', page)
        detail = c.get(f"/api/runs/{run_id}/calls/c2").json()
        assert [i["id"] for i in detail["items"]] == ["c2[0].echo", "c2[1].echo", "c2[2].echo"]
        (frame,) = _frames(c, run_id, 1)
        assert frame["status"] == "succeeded" and frame["maps"] == {"c2": {"succeeded": 3}}
        # approve the waiting run from the dashboard: the same `sophon-dsl approve`, on PostgreSQL
        csrf = c.get("/api/csrf").json()["csrf"]
        assert c.post(f"/api/runs/{wait_id}/approve", headers={"X-CSRF-Token": csrf}).status_code == 202
        assert wait_status(url, wait_id, {"succeeded"})["status"] == "succeeded"
        assert c.get(f"/api/runs/{wait_id}").json()["state"]["state"]["t"] == "sent to bob"
    finally:
        store.close()
