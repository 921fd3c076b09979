"""Language server re-check latency (issue 28): a change to a 500-call plan, from the
client sending ``didChange`` to it receiving that version's ``publishDiagnostics``.

    python benchmarks/bench_lsp.py [--calls 500] [--changes 30] [--debounce 0.05]
                                   [--edit char|line|broken|paste] [--old TREE] [--rounds 1]

Starts ``python -m sophon_dsl lsp`` as an editor does (stdio, a real pygls client), opens a
DSL plan of ``--calls`` calls against a tools file (the project's ``sophon.toml``), then
sends ``--changes`` edits one at a time, each waited for: ``char`` types one character into
a string literal, the commonest edit; ``line`` inserts a line break at the end of a line
(Enter: every statement below moves one line down); ``broken`` deletes a string's closing
quote (a syntax error) and types it again on the next change, by turns; ``paste`` pastes three
calls as lines in the middle of the plan and deletes them again on the next change, by turns
(the statements below move three lines down, then up).  Prints the latency's median / p90 /
max, with the debounce included (``--debounce 0`` leaves it out), and the same check done
in process (``analysis.analyse``: load + the checks) for comparison, with the document's
incremental re-parser (``lsp.incremental.DslReparser``, what the server uses) and without
it (the whole text parsed on every change, as before it).

``--old TREE`` (a checkout of an older commit, e.g. ``git worktree add /tmp/old c6ba4f2``)
measures that tree's server too, in alternated runs (``--rounds`` of each): side by side on
the same machine load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def plan_text(calls: int) -> str:
    rows = []
    for i in range(calls):
        if i % 5 == 4:  # every fifth call reads two earlier results (edges, type checks)
            rows.append(f'$state.s{i} = sheet.create(title="t{i}", rows=[$state.n{i - 1}, $state.n{i - 2}])')
        else:
            rows.append(f'$state.n{i} = web.search(query="query {i}")')
    return "\n".join(rows) + "\n"


_REMOVED: dict[int, int] = {}  # --edit broken: line -> where its quote was deleted


def edited(lines: list[str], k: int, calls: int, edit: str) -> tuple[int, int, int, int, str]:
    """Apply the k-th edit to ``lines`` (in place): the range replaced (start line and
    character, end line and character, 0-based) and the text put there."""
    line = (k * 37) % calls
    if edit == "broken":  # the closing quote of a string deleted (a syntax error), then typed again
        line = (k // 2 * 37) % calls
        if k % 2 == 0:
            end = _REMOVED[line] = lines[line].index('"', lines[line].index('"') + 1)
            lines[line] = lines[line][:end] + lines[line][end + 1:]
            return line, end, line, end + 1, ""
        end = _REMOVED.pop(line)
        lines[line] = lines[line][:end] + '"' + lines[line][end:]
        return line, end, line, end, '"'
    if edit == "line":
        at = len(lines[line])
        lines[line:line + 1] = [lines[line], ""]
        return line, at, line, at, "\n"
    if edit == "paste":  # three calls pasted as lines before a line, then deleted again
        line = (k // 2 * 37) % calls + 1
        if k % 2 == 0:
            block = [f'$state.p{k}_{j} = web.search(query="pasted {j}")' for j in range(3)]
            lines[line:line] = block
            return line, 0, line, 0, "\n".join(block) + "\n"
        del lines[line:line + 3]
        return line, 0, line + 3, 0, ""
    at = lines[line].index('"') + 1
    lines[line] = lines[line][:at] + "x" + lines[line][at:]
    return line, at, line, at, "x"


def server_cpu() -> float | None:
    """CPU seconds used so far by this process's `sophon_dsl lsp` child (Linux /proc; None
    elsewhere): what a re-check costs whatever the machine's load does to the wall time."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmd = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if fields[1] == me and b"sophon_dsl\0lsp" in cmd:
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return None


CPU: dict[str, list[float]] = {}   # server CPU per change, by tree (one mean per run)


async def measure(calls: int, changes: int, debounce: float, root: Path = ROOT, edit: str = "char",
                  name: str = "new") -> list[float]:
    from lsprotocol import types as t
    from pygls.lsp.client import LanguageClient

    base = Path(tempfile.mkdtemp(prefix="bench-lsp-"))
    shutil.copy(ROOT / "examples" / "competitors_tools.py", base / "tools.py")
    (base / "sophon.toml").write_text('tools = ["tools.py"]\n', encoding="utf-8")
    path = base / "big.plan"
    text = plan_text(calls)
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    client = LanguageClient("bench", "1")
    arrived: dict[int, float] = {}
    waiters: dict[int, asyncio.Future] = {}

    @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(params: t.PublishDiagnosticsParams) -> None:
        if params.version is not None:
            arrived[params.version] = time.perf_counter()
            fut = waiters.pop(params.version, None)
            if fut is not None and not fut.done():
                fut.set_result(None)

    env = {**os.environ, "PYTHONPATH": str(root)}
    # started in the tree measured: `-m` puts the working directory first on sys.path
    await client.start_io(sys.executable, "-m", "sophon_dsl", "lsp", "--debounce", str(debounce), env=env,
                          cwd=str(root))
    await client.initialize_async(t.InitializeParams(capabilities=t.ClientCapabilities(), root_uri=base.as_uri()))
    client.initialized(t.InitializedParams())

    async def sent(version: int, action) -> float:
        fut = asyncio.get_running_loop().create_future()
        waiters[version] = fut
        start = time.perf_counter()
        action()
        await asyncio.wait_for(fut, 120)
        return arrived[version] - start

    await sent(1, lambda: client.text_document_did_open(t.DidOpenTextDocumentParams(
        t.TextDocumentItem(uri=uri, language_id="sophon", version=1, text=text))))
    lines = text.split("\n")
    out = []
    cpu_before = server_cpu()
    for k in range(changes):
        line, at, end_line, end_at, typed = edited(lines, k, calls, edit)
        change = t.TextDocumentContentChangePartial(
            range=t.Range(t.Position(line=line, character=at), t.Position(line=end_line, character=end_at)),
            text=typed)
        version = k + 2
        out.append(await sent(version, lambda v=version, c=change: client.text_document_did_change(
            t.DidChangeTextDocumentParams(t.VersionedTextDocumentIdentifier(uri=uri, version=v), [c]))))
    cpu_after = server_cpu()
    if cpu_before is not None and cpu_after is not None:
        CPU.setdefault(name, []).append((cpu_after - cpu_before) / changes)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    shutil.rmtree(base, ignore_errors=True)
    return out


def in_process(calls: int, rounds: int, incremental: bool, edit: str = "char") -> list[float]:
    from sophon_dsl.lsp.analysis import analyse
    from sophon_dsl.lsp.incremental import DslReparser
    from sophon_dsl.tools import ToolRegistry
    from sophon_dsl.toolsource import load_tool_sources

    tools, _ = load_tool_sources([str(ROOT / "examples" / "competitors_tools.py")])
    registry = ToolRegistry(tools)
    text = plan_text(calls)
    reparser = DslReparser() if incremental else None
    analyse(text, "dsl", "big.plan", registry, reparser=reparser)  # warm: schemas derived, parser built
    lines = text.split("\n")
    times, cpu = [], []
    for k in range(rounds):
        edited(lines, k, calls, edit)
        text = "\n".join(lines)
        start, start_cpu = time.perf_counter(), time.process_time()
        analyse(text, "dsl", "big.plan", registry, reparser=reparser)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return times, cpu


def summary(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return (f"{name:<34} median {statistics.median(xs) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms   "
            f"max {xs[-1] * 1000:7.1f} ms   (n={len(xs)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--changes", type=int, default=30)
    ap.add_argument("--debounce", type=float, default=0.05)  # the server's default
    ap.add_argument("--edit", choices=("char", "line", "broken", "paste"), default="char")
    ap.add_argument("--old", type=Path, help="an older checkout whose server is measured too, alternated")
    ap.add_argument("--rounds", type=int, default=1, help="server runs of each tree")
    args = ap.parse_args()
    print(f"{args.calls}-call plan, edit {args.edit}, debounce {args.debounce * 1000:.0f} ms, "
          f"os.cpu_count()={os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    for incremental, name in ((False, "whole parse"), (True, "incremental")):
        wall, cpu = in_process(args.calls, args.changes, incremental, args.edit)
        print(summary(f"in process: {name} + check", wall))
        print(summary("  (CPU time)", cpu))
    trees = [("old", args.old.resolve())] if args.old else []
    trees.append(("new", ROOT))
    got: dict[str, list[float]] = {name: [] for name, _ in trees}
    for _ in range(args.rounds):
        for name, root in trees:
            got[name] += asyncio.run(measure(args.calls, args.changes, args.debounce, root, args.edit, name))
    for name, _root in trees:
        print(summary(f"server ({name}): change -> diagnostics", got[name]))
        if CPU.get(name):
            print(f"  server CPU per change, mean of each run: "
                  f"{', '.join(f'{x * 1000:.1f}' for x in CPU[name])} ms")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
