"""Issue 25 item 8: a run whose process died mid-map is shown `interrupted` (not `running`
for ever), `resume` says so and counts the item calls it restored, and `runs show` lists
per-item progress with in-doubt marks."""

from __future__ import annotations

import json
import subprocess
import sys

from sophon_dsl.cli import main

TOOLS = '''
import os
from pathlib import Path
from sophon_dsl import tool

HERE = Path(__file__).parent

@tool
def act(n: int) -> int:
    if n == 3 and not (HERE / "go-on").exists():
        os._exit(9)   # the process dies in the middle of the map, as kill -9 would
    return n * 10
'''

PLAN = "$state.out = map(over=[1, 2, 3, 4], as=it, concurrency=1) {\n    $local.a = act(n=$it)\n}\n"


def test_a_run_killed_mid_map_is_interrupted_and_resumes_its_items(tmp_path, capsys):
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "m.plan").write_text(PLAN, encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    proc = subprocess.run([sys.executable, "-m", "sophon_dsl", "run", str(tmp_path / "m.plan"), "--tools",
                           str(tmp_path / "tools.py"), "--store", url], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 9, proc.stderr
    run_id = proc.stderr.split("run id: ", 1)[1].split()[0]

    assert main(["runs", "list", "--store", url]) == 0
    assert "interrupted" in capsys.readouterr().out
    assert main(["runs", "list", "--store", url, "--status", "interrupted", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [run_id]

    assert main(["runs", "show", run_id, "--store", url, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "interrupted"
    items = {i["id"]: i for i in shown["items"]}
    assert items["c1[0].act"]["status"] == "succeeded" and items["c1[1].act"]["status"] == "succeeded"
    assert items["c1[2].act"]["in_doubt"] is True          # started, outcome unknown
    assert main(["runs", "show", run_id, "--store", url]) == 0
    text = capsys.readouterr().out
    assert "c1: map pending (2 item call(s) recorded)" in text
    assert "    c1[2].act: pending (in doubt: started, outcome unknown)" in text

    (tmp_path / "go-on").write_text("", encoding="utf-8")
    assert main(["resume", run_id, "--store", url, "--unknown", "rerun"]) == 0
    err = capsys.readouterr().err
    assert f"run {run_id} was interrupted" in err
    assert "2 call(s) restored from the store (2 of them map item calls), 1 in doubt" in err
    assert main(["runs", "list", "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["status"] == "succeeded"
