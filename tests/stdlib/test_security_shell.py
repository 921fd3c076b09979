"""Issue 17, Low: a child that leaves shell.run's process group (setsid) neither outlives
the timeout nor holds the call open."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from stdlib_tools import StdlibConfig

from stdlib_helpers import run, tools_by_name

ESCAPE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    open("escaped.pid", "w").write(str(os.getpid()))
    time.sleep(60)
    sys.exit(0)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie is dead
        return fh.read().split(") ", 1)[1][0] != "Z"


def test_a_setsid_child_is_killed_at_the_timeout(tmp_path):
    tools = tools_by_name(StdlibConfig(sandbox_root=tmp_path, enable_shell=True), ["shell"])
    box: dict[str, Any] = {}

    def work() -> None:
        box["out"] = run(tools["shell.run"](command=[sys.executable, "-c", ESCAPE], timeout=1))

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(30)
    pid = int((tmp_path / "escaped.pid").read_text())
    try:
        assert not worker.is_alive(), "shell.run waited for the escaped child"
        assert box["out"]["timed_out"] is True
        for _ in range(50):
            if not _alive(pid):
                break
            time.sleep(0.1)
        assert not _alive(pid), "the setsid child outlived the timeout"
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
