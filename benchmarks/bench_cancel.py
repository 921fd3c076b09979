"""Cancellation by id (issue 26 item 10): how long after `sophon-dsl cancel RUN_ID` stores its
request does the process holding the run record it ``cancelled``?

A second process runs ``sophon-dsl run --store URL`` on a plan whose second call sleeps for
two minutes; once that call runs, this process stores the cancel request (as ``sophon-dsl
cancel`` does) and polls the run's row every 10 ms until its status is no longer ``running``.
The figure is request-to-recorded-status: the holder's poll (every 0.25 s,
``durable.session.CANCEL_POLL``), cancelling its calls, and committing the summary.

    python benchmarks/bench_cancel.py [--store URL] [--repeat 5]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sophon_dsl.durable import open_store  # noqa: E402

TOOLS = '''
import asyncio
from sophon_dsl.tools import tool

@tool(name="quick", risk="none")
def quick(n: int) -> int:
    return n

@tool(name="slow", risk="none")
async def slow(n: int) -> int:
    await asyncio.sleep(120)
    return n
'''
PLAN = "$state.a = quick(n=1)\n$state.b = slow(n=$state.a)\n"


def once(url: str, work: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "sophon_dsl", "run", str(work / "slow.plan"), "--tools",
                             str(work / "tools.py"), "--store", url, "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        run_id = proc.stderr.readline().split(":", 1)[1].strip()
        with open_store(url) as store:
            while "c1" not in store.load_calls(run_id):
                time.sleep(0.02)
            time.sleep(0.3)  # the slow call is running
            t0 = time.perf_counter()
            store.request_cancel(run_id, {"reason": "bench"}).result()
            while store.get_run(run_id)["status"] == "running":
                time.sleep(0.01)
            return time.perf_counter() - t0
    finally:
        proc.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", default=None, help="store URL (default: a new SQLite file)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "tools.py").write_text(TOOLS)
        (work / "slow.plan").write_text(PLAN)
        url = args.store or f"sqlite:///{work / 'runs.db'}"
        times = [once(url, work) for _ in range(args.repeat)]
    print(f"cancel observed and recorded: median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times) * 1000:.0f} ms over {len(times)} runs ({url.split(':', 1)[0]})")


if __name__ == "__main__":
    main()
