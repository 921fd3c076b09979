"""Dashboard benchmark (issue 29 item 8): page load time of a 10,000-call run in headless
Chromium.

A plan of N calls (N - 2 independent ``echo`` calls, one call reading all of them: a fan-in
of N - 2, and one map over M items) runs with the real CLI into a SQLite store; then
``sophon-dsl ui`` serves it and Chromium (Debian's, driven by Playwright, as the browser
tests) opens its run page.  Measured per page load, in the browser:

* ``response``: navigation start to the end of the HTML (server time and transfer),
* ``load``: navigation start to the ``load`` event (HTML parsed, script run, timeline laid out),
* ``live``: navigation start to the first server-sent snapshot applied (every call's status
  on the page: the page is live),
* ``open call``: a click on a graph node until its panel shows (responsiveness).

The first load reads and lays out the plan (``cold``); later loads find it kept by the app
(``warm``).  Also the HTML size and the number of DOM elements.  The machine is shared:
compare figures from one run.

Run: python benchmarks/bench_ui.py [--calls 10000] [--items 500] [--repeat 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("SOPHON_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
TOOLS = '''from sophon_dsl import tool

@tool
def echo(x: str) -> str:
    return x

@tool
def count(xs: dict) -> int:
    return len(xs)
'''


def env() -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def make_run(work: Path, calls: int, items: int) -> tuple[str, str, float]:
    """The store URL, the run id, and the run's wall time."""
    (work / "tools.py").write_text(TOOLS, encoding="utf-8")
    lines = [f'goal = "{calls} calls"']
    lines += [f'†state.r.k{i} = echo(x="{i}")' for i in range(calls - 2)]
    lines.append("†state.n = count(xs=†state.r)")
    lines.append("†state.m = map(†input.items, as=it) {\n    †local.e = echo(x=†it)\n}")
    (work / "big.plan").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (work / "in.json").write_text(json.dumps({"items": [str(i) for i in range(items)]}), encoding="utf-8")
    url = f"sqlite:///{work / 'runs.db'}"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "sophon_dsl", "run", "big.plan", "--tools", "tools.py",
                           "--input", "@in.json", "--store", url, "--json"], cwd=work, env=env(),
                          capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"the run failed: {proc.stderr[-2000:]}")
    return url, json.loads(proc.stdout)["run_id"], took


def serve(url: str, work: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "sophon_dsl", "ui", "--store", url, "--port", "0"], cwd=work,
                            env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stderr.readline()
    m = re.search(r"serving (http://\S+?)/?$", line.strip())
    if not m:
        proc.kill()
        raise SystemExit(f"the dashboard did not start: {line}")
    return proc, m.group(1)


_TIMES = """() => {
  const n = performance.getEntriesByType("navigation")[0];
  return {response: n.responseEnd, load: n.loadEventEnd, size: n.transferSize || n.encodedBodySize,
          elements: document.getElementsByTagName("*").length};
}"""


def load_once(browser, page_url: str) -> dict:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    page.set_default_timeout(120_000)
    try:
        page.goto(page_url, wait_until="load")
        # the first snapshot applied: every call's status is on the page
        page.wait_for_selector("#run[data-live]", state="attached")
        live = page.evaluate("performance.now()")
        out = page.evaluate(_TIMES)
        out["live"] = live
        started = page.evaluate("performance.now()")
        page.click('g.node[data-node="c1"]')
        page.wait_for_selector("#panel:not([hidden])")
        out["open_call"] = page.evaluate("performance.now()") - started
        return out
    finally:
        ctx.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", help="make the store in this directory and keep it (reused when it holds one)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-ui-"))
    work.mkdir(parents=True, exist_ok=True)
    marker = work / "run.json"
    if marker.exists():
        url, run_id, took = json.loads(marker.read_text())
    else:
        url, run_id, took = make_run(work, args.calls, args.items)
        marker.write_text(json.dumps([url, run_id, took]))
    print(f"run of {args.calls} calls (+{args.items} map items) recorded in {took:.1f} s: {run_id}")
    server, base = serve(url, work)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
            try:
                page_url = f"{base}/runs/{run_id}"
                rows = [("cold",) + (load_once(browser, page_url),)]
                rows += [("warm",) + (load_once(browser, page_url),) for _ in range(args.repeat)]
                listed = load_list(browser, base)
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{'load':<6} {'response ms':>12} {'load ms':>9} {'live ms':>9} {'open call ms':>13} {'HTML KB':>8} "
          f"{'elements':>9}")
    for name, r in rows:
        print(f"{name:<6} {r['response']:>12.0f} {r['load']:>9.0f} {r['live']:>9.0f} {r['open_call']:>13.0f} "
              f"{r['size'] / 1024:>8.0f} {r['elements']:>9}")
    warm = [r for name, r in rows if name == "warm"]
    if warm:
        print(f"warm median: response {statistics.median(r['response'] for r in warm):.0f} ms, "
              f"load {statistics.median(r['load'] for r in warm):.0f} ms, "
              f"live {statistics.median(r['live'] for r in warm):.0f} ms, "
              f"open call {statistics.median(r['open_call'] for r in warm):.0f} ms")
    print(f"runs list: load {listed:.0f} ms")


def load_list(browser, base: str) -> float:
    ctx = browser.new_context()
    page = ctx.new_page()
    try:
        page.goto(base + "/", wait_until="load")
        return page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    finally:
        ctx.close()


if __name__ == "__main__":
    main()
