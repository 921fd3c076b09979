"""``sophon-dsl run|agent --executor ...`` against real ``dask scheduler`` / ``dask worker``
processes started here on 127.0.0.1, and against ``dask:local``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from sophon_dsl.cli import main

TOOLS = str(Path(__file__).with_name("remote_tools.py"))
DASK = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """A scheduler and one worker (two threads, GPU=1) as separate processes: (address, file)."""
    import distributed

    where = tmp_path_factory.mktemp("dask")
    sched_file = where / "scheduler.json"
    common = ["--no-dashboard"]
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--scheduler-file", str(sched_file), *common],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=where)]
    try:
        for _ in range(600):
            if sched_file.exists() and sched_file.stat().st_size:
                break
            time.sleep(0.02)
        procs.append(subprocess.Popen([DASK, "worker", "--scheduler-file", str(sched_file), "--nthreads", "2",
                                       "--host", "127.0.0.1", "--resources", "GPU=1", "--no-nanny", *common],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=where))
        with distributed.Client(scheduler_file=str(sched_file), timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
            address = client.scheduler.address
        yield address, str(sched_file)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


def _plan(tmp_path, text: str) -> str:
    path = tmp_path / "p.plan"
    path.write_text(text)
    return str(path)


def _run(capsys, *argv):
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_on_a_scheduler_and_worker_started_here(dask_cluster, tmp_path, capsys):
    address, _ = dask_cluster
    plan = _plan(tmp_path, "†state.pid = where()\n†state.r = report(label=\"x\")\n†state.i = gpu_interval(seconds=0)\n")
    code, out, err = _run(capsys, plan, "--tools", TOOLS, "--executor", f"dask:{address}", "--json")
    assert code == 0, err
    state = json.loads(out)["state"]["state"]
    assert state["pid"] != os.getpid() and state["r"] == {"pid": state["pid"], "label": "x"}


def test_the_scheduler_file_the_environment_default_and_a_routing_config(dask_cluster, tmp_path, capsys,
                                                                         monkeypatch):
    address, sched_file = dask_cluster
    config = tmp_path / "executor.yaml"
    config.write_text(yaml.safe_dump({"tools": {"where*": {"executor": "dask"}}, "local": ["where_async"]}))
    plan = _plan(tmp_path, "†state.a = where()\n†state.b = where_async(n=1)\n†state.c = report(label=\"y\")\n")
    code, out, err = _run(capsys, plan, "--tools", TOOLS, "--executor", f"dask:scheduler-file:{sched_file}",
                          "--executor-config", str(config), "--json")
    assert code == 0, err
    state = json.loads(out)["state"]["state"]
    assert state["a"] != os.getpid()  # routed
    assert state["b"]["pid"] == os.getpid() and state["c"]["pid"] == os.getpid()  # kept local
    monkeypatch.setenv("SOPHON_DSL_EXECUTOR", f"dask:{address}")
    code, out, err = _run(capsys, plan, "--tools", TOOLS, "--json")
    assert code == 0, err
    assert json.loads(out)["state"]["state"]["c"]["pid"] != os.getpid()
    code, out, err = _run(capsys, plan, "--tools", TOOLS, "--json", "--executor", "local")
    assert code == 0 and json.loads(out)["state"]["state"]["a"] == os.getpid()


def test_preflight_refusal_on_the_command_line(dask_cluster, tmp_path, capsys):
    address, _ = dask_cluster
    plan = _plan(tmp_path, "†state.a = where()\n†state.t = needs_tpu()\n")
    code, out, err = _run(capsys, plan, "--tools", TOOLS, "--executor", f"dask:{address}")
    assert code == 1 and out == ""
    assert "error[E705]" in err and "needs_tpu" in err and "nothing was started" in err
    assert "Traceback" not in err


def test_agent_on_the_cluster(dask_cluster, tmp_path, capsys):
    address, _ = dask_cluster
    script = tmp_path / "replies.yaml"
    script.write_text(yaml.safe_dump(["$state.pid = where()\nreturn $state.pid\n"]))
    code = main(["agent", "where do tools run?", "--tools", TOOLS, "--no-stdlib", "--provider", f"scripted:{script}",
                 "--executor", f"dask:{address}", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "succeeded" and result["output"] != os.getpid()


@pytest.mark.parametrize("argv, code_", [
    (["--executor", "dask:nowhere"], "E701"),
    (["--executor", "dask:tcp://127.0.0.1:notaport"], "E701"),
    (["--executor", "dask:local", "--executor-config", "missing.yaml"], "E702"),
    (["--executor-config", "BAD"], "E702"),
])
def test_bad_executor_flags_exit_2_with_a_diagnostic(tmp_path, capsys, monkeypatch, argv, code_):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "BAD").write_text("tools: {x: {executor: ray}}\n")
    plan = _plan(tmp_path, "†state.a = where()\n")
    for command in (["run", plan], ["agent", "x", "--provider", "scripted:none.yaml"]):
        code = main([*command, "--tools", TOOLS, *argv])
        out, err = capsys.readouterr()
        assert code == 2 and f"error[{code_}]" in err and "Traceback" not in err, err


def _scheduler_files(tmp_path):
    """Bad scheduler files: (spec path, what the message must say)."""
    (tmp_path / "text.json").write_text("not json at all\n")
    (tmp_path / "noaddr.json").write_text('{"id": "Scheduler-1", "type": "Scheduler"}')
    (tmp_path / "list.json").write_text('["tcp://127.0.0.1:8786"]')
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe{}")
    (tmp_path / "deep.json").write_text("[" * 100_000)
    with open(tmp_path / "huge.json", "wb") as fh:  # sparse: 1 MiB + 1 of zero bytes
        fh.truncate((1 << 20) + 1)
    os.mkfifo(tmp_path / "fifo.json")  # opening it for reading must not wait for a writer
    return {
        "empty": ("", "path is empty"),
        "blank": ("  ", "path is empty"),
        "missing": (str(tmp_path / "missing.json"), "does not exist"),
        "directory": (str(tmp_path), "is not a regular file"),
        "dev-zero": ("/dev/zero", "is not a regular file"),
        "fifo": (str(tmp_path / "fifo.json"), "is not a regular file"),
        "huge": (str(tmp_path / "huge.json"), "is larger than 1048576 bytes"),
        "not-json": (str(tmp_path / "text.json"), "is not JSON"),
        "not-utf8": (str(tmp_path / "binary.json"), "is not JSON"),
        "deep": (str(tmp_path / "deep.json"), "is not JSON"),
        "no-address": (str(tmp_path / "noaddr.json"), "has no scheduler address"),
        "not-an-object": (str(tmp_path / "list.json"), "has no scheduler address"),
    }


@pytest.mark.parametrize("case", ["empty", "blank", "missing", "directory", "dev-zero", "fifo", "huge", "not-json",
                                  "not-utf8", "deep", "no-address", "not-an-object"])
def test_a_bad_scheduler_file_exits_2_with_a_diagnostic(tmp_path, capsys, monkeypatch, case):
    # distributed's own reader asserted (AssertionError traceback) or read /dev/zero forever
    path, says = _scheduler_files(tmp_path)[case]
    plan = _plan(tmp_path, "†state.a = where()\n")
    for command in (["run", plan, "--no-store"], ["agent", "x", "--provider", "scripted:none.yaml"]):
        code = main([*command, "--tools", TOOLS, "--executor", f"dask:scheduler-file:{path}"])
        out, err = capsys.readouterr()
        assert code == 2 and "error[E701]" in err and says in err, err
        assert "nothing was started" in err and "Traceback" not in err and out == ""
    monkeypatch.setenv("SOPHON_DSL_EXECUTOR", f"dask:scheduler-file:{path}")  # the default, same refusal
    code = main(["run", plan, "--no-store", "--tools", TOOLS])
    out, err = capsys.readouterr()
    assert code == 2 and "error[E701]" in err and says in err, err


def test_a_bad_scheduler_file_from_python_is_a_clear_error(tmp_path):
    import sophon_dsl
    from sophon_dsl.runtime.errors import PlanInvalid
    from sophon_dsl.scaleout import DaskExecutor, ExecutorConfigError

    files = _scheduler_files(tmp_path)
    for case in ("missing", "dev-zero", "not-json", "no-address"):
        path, says = files[case]
        with pytest.raises(ExecutorConfigError) as info:  # from a spec: refused when made
            DaskExecutor.from_spec(f"dask:scheduler-file:{path}")
        assert [d.code for d in info.value.diagnostics] == ["E701"] and says in str(info.value)
        # made directly: the file is read when the run connects (a scheduler may still be writing it)
        with pytest.raises(PlanInvalid) as info:
            sophon_dsl.run("†state.a = where()", _tools(),
                           tool_executor=DaskExecutor(scheduler_file=path))
        assert [d.code for d in info.value.diagnostics] == ["E701"] and says in str(info.value)


def _tools():
    from sophon_dsl.toolsource import load_tool_source

    specs, diags = load_tool_source(TOOLS)
    assert not diags
    return specs


def test_dask_local_on_the_command_line(tmp_path):
    plan = _plan(tmp_path, "†state.pid = where()\n†state.here = where_local()\n")
    proc = subprocess.run([sys.executable, "-m", "sophon_dsl", "run", plan, "--tools", TOOLS,
                           "--executor", "dask:local", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    state = json.loads(proc.stdout)["state"]["state"]
    assert state["pid"] != state["here"]  # one of the embedded cluster's worker processes


def test_dask_local_threads_on_the_command_line(tmp_path, capsys):
    plan = _plan(tmp_path, "†state.r = report(label=\"t\")\n")
    code, out, err = _run(capsys, plan, "--tools", TOOLS, "--executor", "dask:local-threads", "--json")
    assert code == 0, err
    assert json.loads(out)["state"]["state"]["r"] == {"pid": os.getpid(), "label": "t"}  # in-process workers
