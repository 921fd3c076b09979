"""Issue 25 item 7: reading commands never create a run store; `runs delete` and `runs
prune` (and their Python equivalents); `runs list` shows the plan's file and call counts."""

from __future__ import annotations

import json
import time

import pytest

from sophon_dsl.cli import main
from sophon_dsl.durable import delete_runs, open_store, prune_runs

TOOLS = '''
from sophon_dsl import tool

@tool
def echo(x: int) -> int:
    return x
'''


def _run(tmp_path, url, capsys):
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "orders.plan").write_text("$state.a = echo(x=1)\n$state.b = echo(x=$state.a)\n", encoding="utf-8")
    assert main(["run", str(tmp_path / "orders.plan"), "--tools", str(tmp_path / "tools.py"), "--store", url,
                 "--json"]) == 0
    return json.loads(capsys.readouterr().out)["run_id"]


@pytest.mark.parametrize("argv", [["runs", "list"], ["runs", "show", "r1"], ["resume", "r1"],
                                  ["approve", "r1"], ["runs", "delete", "r1"],
                                  ["runs", "prune", "--older-than", "1d"]])
def test_reading_commands_do_not_create_a_store(tmp_path, capsys, argv):
    url = f"sqlite:///{tmp_path / 'missing_dir' / 'x.db'}"
    assert main([*argv, "--store", url]) == 2
    err = capsys.readouterr().err
    assert f"no run store at {tmp_path / 'missing_dir' / 'x.db'}" in err and "Traceback" not in err
    assert not (tmp_path / "missing_dir").exists()


def test_runs_list_shows_the_file_and_call_counts(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    rid = _run(tmp_path, url, capsys)
    assert main(["runs", "list", "--store", url]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(rid) and "orders.plan" in line and "2/2 calls" in line
    assert main(["runs", "list", "--store", url, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["file"].endswith("orders.plan") and row["calls"] == {"recorded": 2, "total": 2}


def test_runs_delete_and_prune(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    first, second, third = (_run(tmp_path, url, capsys) for _ in range(3))
    assert main(["runs", "delete", first, "nosuch", "--store", url, "--json"]) == 2
    assert json.loads(capsys.readouterr().out) == {"deleted": [first], "missing": ["nosuch"]}
    assert main(["runs", "show", first, "--store", url]) == 2
    capsys.readouterr()
    # nothing is older than a day; everything finished is older than 0 seconds
    assert main(["runs", "prune", "--older-than", "1d", "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": []}
    assert main(["runs", "prune", "--older-than", "0s", "--status", "failed", "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": []}
    assert main(["runs", "prune", "--older-than", "0s", "--store", url, "--json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)["deleted"]) == sorted([second, third])
    with open_store(url) as store:
        assert store.list_runs() == [] and store.load_log(second) == [] and store.load_calls(third) == {}
    assert main(["runs", "prune", "--older-than", "soon", "--store", url]) == 2
    assert "--older-than" in capsys.readouterr().err


def test_python_delete_and_prune(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    a, b = _run(tmp_path, url, capsys), _run(tmp_path, url, capsys)
    assert delete_runs(a, store=url) == [a]
    time.sleep(0.01)
    assert prune_runs("0s", store=url) == [b]
    with open_store(url) as store:
        assert store.list_runs() == []


def test_a_running_run_is_not_deleted(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(url) as store:
        store.create_run("live", plan_id="p", goal=None, spec={"plan": "[]"}, plan_hash="h", owner="me",
                         lease_s=600).result()
        from sophon_dsl.durable.base import StoreError

        with pytest.raises(StoreError, match="run live is running"):
            store.delete_runs(["live"])
        assert store.get_run("live") is not None
        with pytest.raises(StoreError):
            store.prune_runs(0, "running")
