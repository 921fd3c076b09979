"""Start-up cost (issue 9): what a user waits for before anything useful happens.

Cold processes (each a fresh subprocess; best and median of ``--runs``):
    python -c pass                            the interpreter alone (floor, no target)
    python -c "import sophon_dsl"             target 150 ms
    sophon-dsl --help                         target 150 ms
    sophon-dsl check small.plan --tools t.py  target 400 ms (a 2-call plan and a tiny
                                              tools file written to a temporary directory)
In process:
    sophon_dsl.run(plan) on a one-call plan using the standard tool ``math.eval``, timed
    after a first (warm-up) run, whose time is shown too.   target 5 ms

Wall times on a shared 2-core machine are noisy: the verdict column compares the
median to the target and is informational only (the script always exits 0).

Run: python benchmarks/bench_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

PLAN = """\
†state.profile = fetchProfile(userName="ada")
†state.summary = summarize(profile=†state.profile)
"""

TOOLS = """\
from sophon_dsl import tool


@tool
def fetchProfile(userName: str) -> dict:
    return {"name": userName, "plan": "pro"}


@tool
def summarize(profile: dict) -> str:
    return f"{profile['name']} is on the {profile['plan']} plan"
"""

STDLIB_PLAN = '†state.total = math.eval(expression="price * qty", variables={"price": 9.5, "qty": 3})\n'


def cli() -> str:
    """The installed ``sophon-dsl`` next to this interpreter (the project's virtualenv)."""
    here = Path(sys.executable).parent / "sophon-dsl"
    return str(here) if here.exists() else "sophon-dsl"


def cold(argv: list[str], cwd: str, runs: int) -> list[float]:
    """Wall seconds of ``runs`` fresh processes; a failing command stops the script."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        out.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return out


def in_process_run(runs: int) -> tuple[float, list[float]]:
    """(first run, the later runs) of ``sophon_dsl.run`` on a one-call standard-tool plan."""
    import sophon_dsl

    plan = sophon_dsl.loads(STDLIB_PLAN)

    def once() -> float:
        t0 = time.perf_counter()
        result = sophon_dsl.run(plan)
        seconds = time.perf_counter() - t0
        assert result.status == "succeeded", result
        return seconds

    first = once()
    return first, [once() for _ in range(runs)]


def row(label: str, times: list[float], target_ms: float | None, note: str = "") -> None:
    best, med = min(times) * 1000, statistics.median(times) * 1000
    if target_ms is None:
        verdict, target = "", ""
    else:
        verdict, target = ("meets" if med <= target_ms else "MISSES"), f"{target_ms:g}"
    print(f"{label:44} {best:9.1f} {med:9.1f} {target:>8} {verdict:>7}  {note}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="processes (and in-process runs) per row")
    a = ap.parse_args()
    py = sys.executable
    print(f"python {sys.version.split()[0]} ({py}); {os.cpu_count()} cores; best and median of {a.runs}")
    print(f"{'measurement':44} {'best ms':>9} {'median ms':>9} {'target':>8} {'median':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "small.plan").write_text(PLAN, encoding="utf-8")
        Path(tmp, "t.py").write_text(TOOLS, encoding="utf-8")
        measurements: list[tuple[str, list[str], float | None]] = [
            ("python -c pass (interpreter floor)", [py, "-c", "pass"], None),
            ('python -c "import sophon_dsl"', [py, "-c", "import sophon_dsl"], 150),
            ("sophon-dsl --help", [cli(), "--help"], 150),
            ("sophon-dsl check small.plan --tools t.py", [cli(), "check", "small.plan", "--tools", "t.py"], 400),
        ]
        for label, argv, target in measurements:
            cold(argv, tmp, 1)  # warm the OS file cache and Python's bytecode cache first
            row(label, cold(argv, tmp, a.runs), target)
    first, later = in_process_run(a.runs)
    row("sophon_dsl.run(plan), math.eval, after warm-up", later, 5, f"(first run {first * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
