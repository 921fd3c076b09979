"""Start-up cost (issues 9 and 30): what a user waits for before anything useful happens.

Cold processes (each a fresh subprocess; best and median of ``--runs``), CPU seconds of
the process (user + system, from ``getrusage``) and wall seconds:
    python -c pass                               the interpreter alone (floor, no target)
    python -c "import sophon_dsl"                target 150 ms wall
    sophon-dsl --help                            target 0.1 s CPU
    sophon-dsl check five.plan --tools t.py      target 0.25 s CPU (a 5-call plan and a tiny
                                                 tools file written to a temporary directory)
    sophon-dsl run one.plan                      target 0.3 s CPU (one ``math.eval`` call,
                                                 default settings: the run is recorded)
    sophon-dsl agent --provider openai           target 0.3 s wall from the start of the process
                                                 to its first model request (a local server
                                                 that answers 503; the CPU the process had used
                                                 by then is read from /proc where there is one)
In process:
    the first ``sophon_dsl.run()`` of a fresh process against the second, on a 50-call plan of
    standard tools (CPU seconds, ``time.process_time``; imports included): target +50 ms
    ``sophon_dsl.run(plan)`` on a one-call plan using ``math.eval``, after a warm-up run: target 5 ms

Times on a shared 2-core machine are noisy and depend on how fast the machine runs that
minute: the script also prints the time of a fixed pure-Python loop (``calibration``) so
figures from different runs can be compared.  The verdict column compares the median to
the target and is informational only (the script always exits 0).

Side by side: ``--old DIR`` (a checkout of an older commit, e.g. ``git worktree add /tmp/old
COMMIT``) measures every row for this checkout and for DIR, the two alternating run by run
(each child gets ``PYTHONPATH`` of its tree), so both see the same load.

Run: python benchmarks/bench_startup.py [--runs 10] [--only help,check,run,agent,first] [--old DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PLAN = """\
†state.profile = fetchProfile(userName="ada")
†state.summary = summarize(profile=†state.profile)
†state.other = fetchProfile(userName="grace")
†state.both = summarize(profile=†state.other)
†state.total = math.eval(expression="a + b", variables={"a": 1, "b": 2})
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

# 50 calls: a chain of 25 and 25 independent ones
FIFTY = "".join(
    [f'†state.c{i} = math.eval(expression="x + 1", variables={{"x": †state.c{i - 1}}})\n' if i
     else '†state.c0 = math.eval(expression="1")\n' for i in range(25)]
    + [f'†state.w{i} = math.eval(expression="x * 2", variables={{"x": {i}}})\n' for i in range(25)])

FIRST_RUN = """\
import json, sys, time
t0 = time.process_time()
import sophon_dsl
plan = sophon_dsl.loads(open(sys.argv[1], encoding="utf-8").read())
t1 = time.process_time()
first = sophon_dsl.run(plan)
t2 = time.process_time()
second = sophon_dsl.run(plan)
t3 = time.process_time()
assert first.status == second.status == "succeeded", (first.status, second.status)
print(json.dumps({"import_load": t1 - t0, "first": t2 - t1, "second": t3 - t2}))
"""


def cli() -> str:
    """The installed ``sophon-dsl`` next to this interpreter (the project's virtualenv)."""
    here = Path(sys.executable).parent / "sophon-dsl"
    return str(here) if here.exists() else "sophon-dsl"


def calibration() -> float:
    """CPU seconds of a fixed pure-Python loop: how fast this machine runs right now."""
    t0 = time.process_time()
    total = 0
    for i in range(1_000_000):
        total += i
    return time.process_time() - t0


HERE = Path(__file__).resolve().parents[1]  # this checkout
TREES: dict[str, str] = {"": str(HERE)}  # label -> checkout; --old adds "old" (and labels this one "new")


def child_env(tree: str = str(HERE)) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have bytecode caches: so do the measured processes
    env["PYTHONPATH"] = os.pathsep.join([tree, *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def alternated(measure, runs: int) -> dict[str, tuple[list[float], list[float]]]:
    """``measure(tree, 1)`` ``runs`` times per tree, the trees taking turns."""
    out: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in TREES}
    for _ in range(runs):
        for label, tree in TREES.items():
            walls, cpus = measure(tree, 1)
            out[label][0].extend(walls)
            out[label][1].extend(cpus)
    return out


def cold(argv: list[str], cwd: str, runs: int, tree: str = str(HERE)) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) of ``runs`` fresh processes; a failing command stops the script."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=child_env(tree))
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return walls, cpus


def _proc_cpu(pid: int) -> float | None:
    """CPU seconds process ``pid`` has used so far (Linux /proc), None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class _FirstRequest:
    """A local OpenAI-compatible endpoint that notes when the first request arrives and
    answers 503, so the agent stops there."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.at = 0.0
        watcher = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                if not watcher.arrived.is_set():
                    watcher.at = time.perf_counter()
                    watcher.arrived.set()
                self.rfile.read(int(self.headers.get("content-length") or 0))
                body = b'{"error": {"type": "invalid_request_error", "message": "benchmark"}}'
                self.send_response(400)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def agent_first_request(cwd: str, runs: int, tree: str = str(HERE)) -> tuple[list[float], list[float]]:
    """(wall seconds from spawn to the first request, CPU seconds used by then) of ``runs`` agents."""
    walls, cpus = [], []
    for _ in range(runs):
        endpoint = _FirstRequest()
        env = child_env(tree)
        env.update(OPENAI_BASE_URL=endpoint.url(), OPENAI_API_KEY="benchmark")
        argv = [cli(), "agent", "--provider", "openai", "--no-store", "--approve", "no", "--max-turns", "1",
                "add 2 and 3"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        cpu = None
        while not endpoint.arrived.wait(0.001):
            if proc.poll() is not None:
                raise SystemExit(f"the agent ended before any request:\n{proc.stderr.read().decode()}")
        cpu = _proc_cpu(proc.pid)
        walls.append(endpoint.at - t0)
        if cpu is not None:
            cpus.append(cpu)
        proc.wait()
        endpoint.server.shutdown()
        endpoint.server.server_close()
    return walls, cpus


def row(label: str, times: list[float], target: float | None, unit: str, note: str = "") -> None:
    if not times:
        print(f"{label:44} {'n/a':>9}  {note}", flush=True)
        return
    best, med = min(times), statistics.median(times)
    verdict = "" if target is None else ("meets" if med <= target else "MISSES")
    target_text = "" if target is None else f"{target:g}"
    print(f"{label:44} {best:9.3f} {med:9.3f} {target_text:>7} {unit:>4} {verdict:>7}  {note}", flush=True)


def first_vs_second(tmp: str, runs: int, label: str = "", tree: str = str(HERE)) -> None:
    path = Path(tmp, "fifty.plan")
    path.write_text(FIFTY, encoding="utf-8")
    script = Path(tmp, "first_run.py")
    script.write_text(FIRST_RUN, encoding="utf-8")
    extra, firsts, seconds, imports = [], [], [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True,
                             env=child_env(tree), cwd=tmp)
        if out.returncode != 0:
            raise SystemExit(f"first-run script failed:\n{out.stdout}{out.stderr}")
        figures = json.loads(out.stdout)
        extra.append(figures["first"] - figures["second"])
        firsts.append(figures["first"])
        seconds.append(figures["second"])
        imports.append(figures["import_load"])
    row(f"first run() - second, 50 calls (CPU){label}", extra, 0.05, "s",
        f"first {statistics.median(firsts):.3f} s, second {statistics.median(seconds):.3f} s, "
        f"import sophon_dsl + loads {statistics.median(imports):.3f} s")


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="processes (and in-process runs) per row")
    ap.add_argument("--only", default="", help="comma-separated rows: import,help,check,run,agent,first,inproc")
    ap.add_argument("--old", default=None, metavar="DIR",
                    help="a checkout of an older commit, measured side by side (runs alternated)")
    a = ap.parse_args()
    if a.old:
        TREES.clear()
        TREES.update({" [new]": str(HERE), " [old]": str(Path(a.old).resolve())})
    only = set(filter(None, a.only.split(",")))

    def wanted(name: str) -> bool:
        return not only or name in only

    py = sys.executable
    print(f"python {sys.version.split()[0]} ({py}); {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}; "
          f"calibration loop {calibration():.3f} s CPU; best and median of {a.runs}")
    print(f"{'measurement':44} {'best':>9} {'median':>9} {'target':>7} {'unit':>4} {'median':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "five.plan").write_text(PLAN, encoding="utf-8")
        Path(tmp, "one.plan").write_text(STDLIB_PLAN, encoding="utf-8")
        Path(tmp, "t.py").write_text(TOOLS, encoding="utf-8")
        # a private data directory, so `run` records its run in a fresh store as a new user would
        os.environ.setdefault("XDG_DATA_HOME", str(Path(tmp, "data")))
        measurements: list[tuple[str, str, list[str], float | None, float | None]] = [
            ("import", "python -c pass (interpreter floor)", [py, "-c", "pass"], None, None),
            ("import", 'python -c "import sophon_dsl"', [py, "-c", "import sophon_dsl"], 0.15, None),
            ("help", "sophon-dsl --help", [cli(), "--help"], None, 0.1),
            ("check", "sophon-dsl check five.plan --tools t.py", [cli(), "check", "five.plan", "--tools", "t.py"],
             None, 0.25),
            ("run", "sophon-dsl run one.plan (math.eval)", [cli(), "run", "one.plan"], None, 0.3),
        ]
        for name, label, argv, wall_target, cpu_target in measurements:
            if not wanted(name) and not (name == "import" and not only):
                continue
            for tree in TREES.values():
                cold(argv, tmp, 1, tree)  # warm the OS file cache and Python's bytecode cache first
            results = alternated(lambda tree, n, argv=argv: cold(argv, tmp, n, tree), a.runs)
            for tree_label, (walls, cpus) in results.items():
                row(label + tree_label + " (wall)", walls, wall_target, "s")
                row(label + tree_label + " (CPU)", cpus, cpu_target, "s")
        if wanted("agent"):
            for tree in TREES.values():
                agent_first_request(tmp, 1, tree)
            results = alternated(lambda tree, n: agent_first_request(tmp, n, tree), a.runs)
            for tree_label, (walls, cpus) in results.items():
                row(f"sophon-dsl agent: first request{tree_label} (wall)", walls, 0.3, "s")
                row(f"sophon-dsl agent: first request{tree_label} (CPU)", cpus, None, "s")
        if wanted("first"):
            for tree_label, tree in TREES.items():
                first_vs_second(tmp, max(3, a.runs // 2), tree_label, tree)
    if wanted("inproc"):
        first, later = in_process_run(a.runs)
        row("run(plan), math.eval, after warm-up (wall)", later, 0.005, "s", f"(first run {first * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
