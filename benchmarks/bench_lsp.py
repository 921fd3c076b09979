"""Language server re-check latency (issue 28): a change to a 500-call plan, from the
client sending ``didChange`` to it receiving that version's ``publishDiagnostics``.

    python benchmarks/bench_lsp.py [--calls 500] [--changes 30] [--debounce 0.05]

Starts ``python -m sophon_dsl lsp`` as an editor does (stdio, a real pygls client), opens a
DSL plan of ``--calls`` calls against a tools file (the project's ``sophon.toml``), then
sends ``--changes`` edits one at a time, each waited for: one character typed into a
string literal, the commonest edit.  Prints the latency's median / p90 / max, with the
debounce included, and the same check done in process (``analysis.analyse``: load + the
checks) for comparison: the difference is the protocol and the debounce.
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


async def measure(calls: int, changes: int, debounce: float) -> list[float]:
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

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    await client.start_io(sys.executable, "-m", "sophon_dsl", "lsp", "--debounce", str(debounce), env=env)
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
    for k in range(changes):
        line = (k * 37) % calls
        at = lines[line].index('"') + 1
        pos = t.Position(line=line, character=at)
        change = t.TextDocumentContentChangePartial(range=t.Range(pos, pos), text="x")
        lines[line] = lines[line][:at] + "x" + lines[line][at:]
        version = k + 2
        out.append(await sent(version, lambda v=version, c=change: client.text_document_did_change(
            t.DidChangeTextDocumentParams(t.VersionedTextDocumentIdentifier(uri=uri, version=v), [c]))))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    shutil.rmtree(base, ignore_errors=True)
    return out


def in_process(calls: int, rounds: int) -> list[float]:
    from sophon_dsl.lsp.analysis import analyse
    from sophon_dsl.tools import ToolRegistry
    from sophon_dsl.toolsource import load_tool_sources

    tools, _ = load_tool_sources([str(ROOT / "examples" / "competitors_tools.py")])
    registry = ToolRegistry(tools)
    text = plan_text(calls)
    analyse(text, "dsl", "big.plan", registry)  # warm: schemas derived, parser built
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        analyse(text, "dsl", "big.plan", registry)
        times.append(time.perf_counter() - start)
    return times


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
    args = ap.parse_args()
    print(f"{args.calls}-call plan, debounce {args.debounce * 1000:.0f} ms, os.cpu_count()={os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(summary("in process: load + check", in_process(args.calls, args.changes)))
    print(summary("server: didChange -> diagnostics", asyncio.run(measure(args.calls, args.changes, args.debounce))))


if __name__ == "__main__":
    main()
