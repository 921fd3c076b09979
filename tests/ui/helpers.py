"""Shared by the dashboard tests: a store with runs made by the real CLI, and the server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TOOLS = '''
import os, time
from sophon_dsl import tool
from sophon_dsl.model import Risk

@tool
def hostile(x: str) -> dict:
    """Returns what a malicious page might."""
    return {"html": "<script>alert('x')</script><img src=x onerror=alert(1)>",
            "link": "javascript:alert(document.cookie)", "bidi": "abc\\u202egnp.exe", "x": x}

@tool
def wait_for(path: str) -> str:
    """Waits until a file exists (the test creates it)."""
    for _ in range(1200):
        if os.path.exists(path):
            return "released"
        time.sleep(0.05)
    raise RuntimeError("never released")

@tool
def echo(x: str) -> str:
    return x

@tool(risk=Risk.HIGH)
def send(to: str) -> str:
    """Sends something somewhere."""
    return "sent to " + to

_tries = {}

@tool
def flaky(key: str, release: str = "") -> str:
    """Fails twice per key (a <b>down</b> error), then returns the key: at once, or once the
    file ``release`` exists when one is named."""
    from sophon_dsl.runtime import RunError
    n = _tries[key] = _tries.get(key, 0) + 1
    if n <= 2:
        raise RunError("Net.Down", f"<i>{key}</i> is down (try {n})")
    for _ in range(1200):
        if not release or os.path.exists(release):
            return key
        time.sleep(0.05)
    raise RuntimeError("never released")
'''


def env() -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    e["PYTHONPATH"] = str(ROOT)
    return e


def cli(*args: str, cwd: Path, background: bool = False):
    cmd = [sys.executable, "-m", "sophon_dsl", *args]
    if background:
        return subprocess.Popen(cmd, cwd=cwd, env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=cwd, env=env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)


def make_plan(tmp: Path, name: str, text: str) -> Path:
    (tmp / "tools.py").write_text(TOOLS, encoding="utf-8")
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return p


def start_ui(store: str, cwd: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "sophon_dsl", "ui", "--store", store, "--port", "0", *extra],
                            cwd=cwd, env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    m = re.search(r"serving (http://\S+?)/?$", line.strip())
    if not m:
        proc.kill()
        raise AssertionError(f"the dashboard did not start: {line}{proc.stderr.read()}")
    return proc, m.group(1)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_status(store_url: str, run_id: str | None, want: set[str], timeout: float = 60.0) -> dict:
    from sophon_dsl.durable import open_store

    store = open_store(store_url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = store.list_runs()
            for r in rows:
                if (run_id is None or r["run_id"] == run_id) and r["status"] in want:
                    return r
            time.sleep(0.1)
    finally:
        store.close()
    raise AssertionError(f"no run reached {want}")
