"""`run --approve wait`: the summary line names what happened instead of ending at its colon.

The plan gate leaves the run waiting before any call has a record, so the line read
`plan waiting: ` (nothing after the colon); it now reads `plan waiting: no call started`."""

from __future__ import annotations

from pathlib import Path

from sophon_dsl.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_waiting_run_summary(tmp_path, capsys):
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    argv = ["run", str(EXAMPLES / "competitors.plan"), "--tools", str(EXAMPLES / "competitors_tools.py"),
            "--input", f"@{EXAMPLES / 'competitors_input.json'}", "--store", store]
    assert main([*argv, "--approve", "wait"]) == 3
    err = capsys.readouterr().err
    assert "plan waiting: no call started\n" in err
    assert "waiting for approval: sophon-dsl approve " in err
    run_id = err.split("run id: ", 1)[1].split()[0]
    assert main(["approve", run_id, "--store", store]) == 0
    assert "plan succeeded: 5 succeeded" in capsys.readouterr().err
