"""Plans and tools shared by the durable-run tests: every tool call lands in a side-effect
ledger (a JSON-lines file, so a killed process's calls are still there), with its
idempotency key."""

from __future__ import annotations

import json
import os
import random
import time

import sophon_dsl
from sophon_dsl import tool
from sophon_dsl.runtime.errors import RunError

LEDGER = os.environ.get("SOPHON_TEST_LEDGER")
_memory: list = []


def ledger_lines(path: str | None = None) -> list[dict]:
    if path is None:
        return list(_memory)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def reset_ledger() -> None:
    _memory.clear()


def _note(tool_name: str) -> None:
    cur = sophon_dsl.current_call()
    entry = {"tool": tool_name, "call": cur.call_id, "key": cur.key, "attempt": cur.attempt}
    if LEDGER:  # (a subprocess of the kill test: each call takes a moment, so kills land mid-run)
        with open(LEDGER, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
        time.sleep(0.001)
    else:
        _memory.append(entry)


@tool
def act(n: int, x: int = 0) -> int:
    """A side effect (not idempotent)."""
    _note("act")
    return (n * 7 + x) % 1000


@tool(idempotent=True)
def look(n: int, x: int = 0) -> int:
    """Safe to repeat."""
    _note("look")
    return (n * 3 + x) % 1000


@tool
def flaky(n: int, x: int = 0) -> int:
    """Fails for some inputs (a branching output catches it)."""
    _note("flaky")
    if (n + x) % 3 == 0:
        raise RunError("Flaky.Failed", f"n={n}")
    return n + x


@tool
async def pause(n: int, x: int = 0) -> int:
    """Takes a little time (so a kill lands while calls are in flight)."""
    import asyncio

    _note("pause")
    await asyncio.sleep(0.002)
    return n + x


TOOLS = [act, look, flaky, pause]


def seeded_plan(seed: int, calls: int = 100, maps: bool = False) -> str:
    """A plan of ``calls`` calls: chains, merges (`<<=` into one shared list), branches with
    caught failures (`a || b`), reads of earlier results; with ``maps``, some are maps (items
    of two chained calls, one catching its failures, reading an earlier result)."""
    rng = random.Random(seed)
    lines = []
    made: list[str] = []
    for k in range(calls):
        if maps and rng.random() < 0.1:
            outer = f"$state.v{rng.choice(made)}" if made else "0"
            lines.append(f"$state.m{k} = map(over=[{k}, {k + 1}, {k + 2}], as=it, concurrency=2) {{\n"
                         f"    $local.a = act(n=$it, x={outer})\n"
                         f"    $local.b || $local.e = flaky(n=$local.a, x=$index)\n"
                         f"    return {{a: $local.a, b: $local.b || $local.e}}\n}}")
            continue
        tool_name = rng.choice(["act", "look", "flaky", "pause", "act"])
        x = f"$state.v{rng.choice(made)}" if made and rng.random() < 0.6 else str(rng.randrange(10))
        if isinstance(x, str) and x.startswith("$") and rng.random() < 0.3:
            x = f"{x} || $input.zero"  # a read with a fallback (the writer may have failed)
        if tool_name == "flaky":
            lines.append(f"$state.v{k} || $state.err{k} = flaky(n={k}, x={x})")
        elif rng.random() < 0.15:
            lines.append(f"$state.merged <<= {tool_name}(n={k}, x={x})")
            continue
        else:
            lines.append(f"$state.v{k} = {tool_name}(n={k}, x={x})")
        made.append(str(k))
    return "\n".join(lines) + "\n"


def comparable(result) -> dict:
    """What must be equal between an interrupted-and-resumed run and an uninterrupted one."""
    j = result.to_json()
    state = j["state"]
    if "state" in state and "merged" in state["state"]:  # the order of `<<=` merges depends on timing
        state = {**state, "state": {**state["state"], "merged": sorted(state["state"]["merged"])}}
    # the log as a multiset (its order between independent calls depends on timing even in
    # two uninterrupted runs): every entry once, none repeated by the resume
    log = sorted(json.dumps([e["kind"], e["path"], e["value"], e["method"], e["call"]], sort_keys=True)
                 for e in j["log"])
    assert [e["seq"] for e in j["log"]] == list(range(len(j["log"])))
    return {"status": j["status"], "state": state, "output": j["output"], "log": log,
            # (sorted: a resumed run lists the item calls of a map committed before after the rest)
            "calls": sorted((c["id"], c["status"], (c["error"] or {}).get("error")) for c in j["calls"])}
