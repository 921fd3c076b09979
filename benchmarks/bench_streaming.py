"""Streamed dispatch benchmark (issue 5).

(a) Dispatch latency: time from the arrival of a call's last token to its dispatch
    (the scheduler task created) and to the tool's first line, over a streamed plan of
    independent calls.  Target <= 5 ms.
(b) End to end: the agent loop with streamed dispatch vs parse-then-run (collect the
    whole reply, then parse, check and run it with ``sophon_dsl.runtime.arun``), on a
    reply streamed at 50 tokens/s (cl100k tokens when tiktoken is installed, else
    4-character pieces) with tools of 200-800 ms (seeded).  Target >= 1.3x faster.
    Several plan shapes are measured; the ratio depends on how much of the plan's
    critical path can overlap the stream.
    Streamed reads are decided as textual order allows (issue 10 item 16, issue 30
    item 6): in the default order ("any") a read whose writers were written before it
    goes as soon as they have ended (a read written before its writers waits for the
    end of the reply); in "written" order (``Agent(stream_order="written")``) also a
    read of earlier turns' data goes at once.  Both are measured.
(j) The same for JSON replies (issue 11 item 1): the seed's solution shape
    ``{"calls": [...], "output": ...}``, one call object per line, each dispatched
    when its closing brace arrives: (a)'s latency and (b)'s end to end.
(c) Checking as the reply arrives (issue 9): a 1,000-call DSL reply (``random-list``
    shape of ``_shapes.py``: each call reads 1-3 earlier results through a list
    parameter) fed token by token to a lazy ``StreamTurn`` that dispatches nothing
    (``dispatch=False``), then ``close_stream()``, vs ``sophon_dsl.check`` of
    ``sophon_dsl.loads`` of the whole text once.  Target <= 2x.  Sizes climb by
    doubling from 125 calls; one predicted to exceed ``--budget`` seconds is skipped.

Run: python benchmarks/bench_streaming.py [--rate 50] [--seed 1] [--quick] [--parts abjc]
                                          [--check-calls 1000] [--budget 60]
(``--quick`` runs 4x faster: 4x the token rate and a quarter of the latencies; ratios are
the same up to scheduling noise.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from typing import Any, AsyncIterator, Sequence

from _shapes import Ladder, build, climb, noop, say

import sophon_dsl
from sophon_dsl import ToolRegistry
from sophon_dsl.llm.agent import Agent, warm_up
from sophon_dsl.llm.provider import Message
from sophon_dsl.llm.stream import StreamTurn
from sophon_dsl.runtime import arun
from sophon_dsl.tools import as_registry, tool


def tokenize(text: str) -> list[str]:
    try:
        from sophon_dsl.llm.prompt import _encoder

        enc = _encoder()
        return [enc.decode([t]) for t in enc.encode(text)]
    except Exception:  # noqa: BLE001 - no tiktoken: 4-character pieces (about one token each)
        return [text[k:k + 4] for k in range(0, len(text), 4)]


class PacedProvider:
    """Streams one fixed reply token by token at ``rate`` tokens per second (no drift)."""

    name = "paced"

    def __init__(self, tokens: list[str], rate: float):
        self.tokens = tokens
        self.rate = rate
        self.finished_at: float | None = None

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[str]:
        t0 = time.perf_counter()
        for k, tok in enumerate(self.tokens):
            delay = t0 + (k + 1) / self.rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            yield tok
        self.finished_at = time.perf_counter()


def make_tools(latency: dict[str, float], starts: dict[str, float]):
    @tool
    async def work(tag: str, inputs: list | None = None) -> dict:
        starts[tag] = time.perf_counter()
        await asyncio.sleep(latency.get(tag, 0.0))
        return {"tag": tag, "n": len(inputs or [])}

    return as_registry([work], stdlib=False)


# ---------------------------------------------------------------------------
# plan shapes: each is a list of (tag, [tags it reads])


def shape_independent(n: int = 10) -> list[tuple[str, list[str]]]:
    return [(f"s{i}", []) for i in range(n)]


def shape_chain(n: int = 10) -> list[tuple[str, list[str]]]:
    return [(f"s{i}", [f"s{i - 1}"] if i else []) for i in range(n)]


def shape_pipeline(branches: int = 3, depth: int = 3) -> list[tuple[str, list[str]]]:
    """Research pipeline written stage by stage: search -> fetch -> summarise per branch, then combine."""
    out: list[tuple[str, list[str]]] = []
    for d in range(depth):
        for b in range(branches):
            out.append((f"b{b}d{d}", [f"b{b}d{d - 1}"] if d else []))
    out.append(("combine", [f"b{b}d{depth - 1}" for b in range(branches)]))
    return out


def plan_text(shape: list[tuple[str, list[str]]]) -> str:
    lines = []
    for tag, reads in shape:
        args = f'tag="{tag}"'
        if reads:
            args += ", inputs=[" + ", ".join(f"$state.{r}" for r in reads) + "]"
        lines.append(f"$state.{tag} = work({args})")
    lines.append(f"return $state.{shape[-1][0]}.tag")
    return "\n".join(lines) + "\n"


def plan_json(shape: list[tuple[str, list[str]]]) -> str:
    """The same plan as a seed-shaped JSON solution, one call object per line."""
    lines = []
    for tag, reads in shape:
        call: dict[str, Any] = {"_tool": "work", "tag": tag}
        if reads:
            call["inputs"] = [f"†state.{r}" for r in reads]
        call["_outputPath"] = f"†state.{tag}"
        lines.append("  " + json.dumps(call, ensure_ascii=False))
    return ('{"calls": [\n' + ",\n".join(lines) + "\n],\n"
            + f' "output": "†state.{shape[-1][0]}.tag"}}\n')


def reply_of(shape: list[tuple[str, list[str]]], form: str) -> str:
    return plan_json(shape) if form == "json" else plan_text(shape)


def critical_path(shape: list[tuple[str, list[str]]], lat: dict[str, float]) -> float:
    fin: dict[str, float] = {}
    for tag, reads in shape:
        fin[tag] = max((fin[r] for r in reads), default=0.0) + lat[tag]
    return max(fin.values())


# ---------------------------------------------------------------------------


async def dispatch_latency(rate: float, n: int = 20, form: str = "dsl") -> dict:
    warm_up()
    shape = shape_independent(n)
    tokens = tokenize(reply_of(shape, form))
    starts: dict[str, float] = {}
    reg = make_tools({}, starts)
    for spec in reg.values():  # @tool derives its schemas on first read (pydantic): not dispatch
        spec.input_schema  # noqa: B018
    turn = StreamTurn(reg)
    await asyncio.sleep(0)
    t0 = time.perf_counter()
    for k, tok in enumerate(tokens):
        delay = t0 + (k + 1) / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        turn.feed(tok)
    out = await turn.finish()
    sched = turn.scheduler
    assert sched is not None and out.status == "succeeded", out.errors
    created = [(sched.dispatched_at[i] - sched.arrived_at[i]) * 1000 for i in range(n)]
    started = [(starts[f"s{i}"] - sched.arrived_at[i]) * 1000 for i in range(n)]

    def stats(xs: list[float]) -> dict:
        xs = sorted(xs)
        return {"median_ms": round(statistics.median(xs), 3), "p95_ms": round(xs[int(0.95 * (len(xs) - 1))], 3),
                "max_ms": round(xs[-1], 3)}

    return {"calls": n, "to_dispatch": stats(created), "to_tool_start": stats(started)}


async def streamed_run(tokens: list[str], rate: float, lat: dict[str, float], order: str) -> tuple[float, float]:
    """The agent loop, eager mode, on the paced reply: (seconds, seconds the stream took)."""
    starts: dict[str, float] = {}
    provider = PacedProvider(tokens, rate)
    agent = Agent(provider, tools=make_tools(lat, starts), max_calls=None, max_turns=1, stream_order=order)
    t0 = time.perf_counter()
    res = await agent.arun("bench")
    streamed = time.perf_counter() - t0
    assert res.status == "succeeded", [t.errors for t in res.turns]
    return streamed, (provider.finished_at or t0) - t0


async def end_to_end(shape: list[tuple[str, list[str]]], rate: float, lat: dict[str, float],
                     form: str = "dsl") -> dict:
    text = reply_of(shape, form)
    tokens = tokenize(text)
    streamed, stream_time = await streamed_run(tokens, rate, lat, "any")
    written, _ = await streamed_run(tokens, rate, lat, "written")
    # parse-then-run: the same stream collected, then parsed, checked and run
    starts2: dict[str, float] = {}
    provider2 = PacedProvider(tokens, rate)
    reg2 = make_tools(lat, starts2)
    t0 = time.perf_counter()
    parts = [tok async for tok in provider2.stream([])]
    result = await arun("".join(parts), reg2)
    baseline = time.perf_counter() - t0
    assert result.status == "succeeded"
    return {"calls": len(shape), "tokens": len(tokens), "stream_s": round(stream_time, 3),
            "critical_path_s": round(critical_path(shape, lat), 3), "streamed_s": round(streamed, 3),
            "written_s": round(written, 3), "parse_then_run_s": round(baseline, 3),
            "speedup": round(baseline / streamed, 3), "speedup_written": round(baseline / written, 3)}


# ---------------------------------------------------------------------------
# (c) checking as the reply arrives vs once at the end

CHECK_RATIO_TARGET = 2.0


def reply_text(n: int, seed: int) -> str:
    return sophon_dsl.dumps(build("random-list", n, seed).plan, "dsl")


async def check_streamed(deltas: list[str], registry: ToolRegistry) -> float:
    """Seconds to feed every delta to a lazy turn that runs nothing, then close it."""
    turn = StreamTurn(registry, mode="lazy", dispatch=False, max_calls=None)
    t0 = time.perf_counter()
    for d in deltas:
        turn.feed(d)
    turn.close_stream()
    seconds = time.perf_counter() - t0
    assert not turn.errors, turn.errors[:3]
    assert len(turn.calls) == len(turn.ids) and turn.calls, "the reply's calls did not arrive"
    return seconds


def check_once(text: str, registry: ToolRegistry) -> float:
    t0 = time.perf_counter()
    plan = sophon_dsl.loads(text, "dsl")
    diags = sophon_dsl.check(plan, tools=registry)
    seconds = time.perf_counter() - t0
    assert not [d for d in diags if d.is_error], diags[:3]
    return seconds


def check_as_it_arrives(n: int, seed: int, budget: float, repeat: int = 3) -> None:
    registry = ToolRegistry([noop])
    say(f"(c) checking a {n:,}-call DSL reply as it arrives (lazy StreamTurn, dispatch=False, fed "
        f"token by token) vs checking it once at the end (loads + check)   (target <= {CHECK_RATIO_TARGET:g}x)")

    def streamed(k: int) -> float:
        return asyncio.run(check_streamed(tokenize(reply_text(k, seed)), registry))

    streamed(20)  # warm-up: imports, parser tables
    ladder = Ladder(budget)
    fits = climb(ladder, n, streamed)
    rows = list(ladder.points)
    if fits:
        t = streamed(n)
        if t * (repeat - 1) <= budget:
            t = min([t] + [streamed(n) for _ in range(repeat - 1)])
        rows.append((n, t))
    say(f"    {'calls':>7} {'tokens':>8} {'as it arrives':>14} {'once at end':>12} {'ratio':>7}")
    for k, t in rows:
        text = reply_text(k, seed)
        once = min(check_once(text, registry) for _ in range(repeat))
        verdict = "" if k != n else ("  meets" if t / once <= CHECK_RATIO_TARGET else "  MISSES")
        say(f"    {k:>7,} {len(tokenize(text)):>8,} {t:13.3f}s {once:11.3f}s {t / once:6.1f}x{verdict}")
    if not fits:
        say(f"    {n:>7,} {ladder.why_not(n)}")


async def latency_lines(rate: float, form: str, label: str) -> None:
    lat_res = await dispatch_latency(rate, form=form)
    print(f"({label}) last token -> dispatch: median {{median_ms}} ms, p95 {{p95_ms}} ms, max {{max_ms}} ms".format(
        **lat_res["to_dispatch"]) + "   (target <= 5 ms)")
    print("    last token -> tool start: median {median_ms} ms, p95 {p95_ms} ms, max {max_ms} ms".format(
        **lat_res["to_tool_start"]))


async def end_to_end_lines(rate: float, seed: int, scale: float, form: str, label: str) -> None:
    rng = random.Random(seed)
    shapes = {"independent x10": shape_independent(10), "chain x10": shape_chain(10),
              "pipeline 3x3+1": shape_pipeline(3, 3), "pipeline 2x5+1": shape_pipeline(2, 5)}
    print(f"({label}) end to end, streamed dispatch (any order / written order) vs parse-then-run"
          "   (target >= 1.3x)")
    for name, shape in shapes.items():
        lat = {tag: rng.uniform(0.2, 0.8) * scale for tag, _ in shape}
        r = await end_to_end(shape, rate, lat, form)
        print(f"    {name:16s} {r['tokens']:4d} tokens, stream {r['stream_s']:.2f} s, critical path "
              f"{r['critical_path_s']:.2f} s: streamed {r['streamed_s']:.2f} / {r['written_s']:.2f} s, "
              f"parse-then-run {r['parse_then_run_s']:.2f} s -> {r['speedup']:.2f}x / {r['speedup_written']:.2f}x")


async def main_async(rate: float, seed: int, scale: float, parts: str = "ab") -> None:
    print(f"stream: {rate:g} tokens/s; tools {200 * scale:g}-{800 * scale:g} ms; seed {seed}")
    if "a" in parts:
        await latency_lines(rate, "dsl", "a")
    if "b" in parts:
        await end_to_end_lines(rate, seed, scale, "dsl", "b")
    if "j" in parts:
        print("JSON replies ({\"calls\": [...], \"output\": ...}, one call object per line):")
        await latency_lines(rate, "json", "j-a")
        await end_to_end_lines(rate, seed, scale, "json", "j-b")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=50.0, help="tokens per second (default 50)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="4x the rate, a quarter of the latencies")
    ap.add_argument("--parts", default="abjc",
                    help="which of (a) latency, (b) end to end, (j) both for JSON replies, (c) checking")
    ap.add_argument("--check-calls", type=int, default=1000, help="reply size for (c) (default 1000)")
    ap.add_argument("--budget", type=float, default=60.0,
                    help="seconds one (c) measurement may take; larger sizes are skipped (default 60)")
    args = ap.parse_args()
    rate, scale = (args.rate * 4, 0.25) if args.quick else (args.rate, 1.0)
    if set("abj") & set(args.parts):
        asyncio.run(main_async(rate, args.seed, scale, args.parts))
    if "c" in args.parts:
        check_as_it_arrives(args.check_calls, args.seed, args.budget)


if __name__ == "__main__":
    main()
