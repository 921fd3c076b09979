"""Plan shapes and time budgets shared by the benchmarks.

Every shape is a list of calls to one tool, ``work(key=i, ...)``, writing ``†state.n{i}``
(``prefix`` writers write ``†state.rows.k{i}``), built with the public model classes so
the scripts keep working while the compiler and runtime move.  ``parents[i]`` lists the
calls whose output call ``i`` reads (for the critical path and for LangGraph).

    wide        no call reads anything (``inputs=[]``)
    chain       each call reads the one before it (``inputs=[†state.n{i-1}]``)
    random      each call reads at most one of the 20 before it (``inputs=[...]``)
    random-list each call but the first reads 1-3 of the 60 before it through a list
                parameter: ``deps=[†state.n3, †state.n7]``
    random-obj  the same graph read through an object parameter:
                ``deps={"a": †state.n3, "b": †state.n7}``
    fanin       N-1 independent calls, then one call reading all N-1 results in a list
                parameter (``deps=[†state.n0, ..., †state.n{N-2}]``)
    prefix      N-10 calls write ``†state.rows.k{i}``; 10 calls read ``†state.rows`` whole
    map         one map over ``†input.items`` (N integers) whose body is one call reading
                the item: ``work(key=†item)`` writing the item's local ``†local.r``

The first three are the shapes of the issue 3 benchmark; the next four issue 9's; ``map``
issue 30's (a map of N items; the map call itself is not counted).

:func:`floor` runs a shape's graph in bare asyncio, the floor each shape is compared with
(issue 30 item 9): the same no-op tool called once per call in its own task, created the
moment its parents have ended (the parents' results passed as the shape passes them),
with nothing else: no state, records, events, validation or result.
"""

from __future__ import annotations

import gc
import math
import random
import tracemalloc
from dataclasses import dataclass
from typing import Any, Callable

from sophon_dsl import tool
from sophon_dsl.maps import make_map_call
from sophon_dsl.model import Call, ListValue, Literal, MapSpec, ObjectValue, OutputTarget, Param, Plan, Reference

OLD_SHAPES = ("wide", "chain", "random")
NEW_SHAPES = ("random-list", "random-obj", "fanin", "prefix")
ALL_SHAPES = OLD_SHAPES + NEW_SHAPES + ("map",)
PREFIX_READERS = 10
TOOL = "work"
SLOPE_TARGET = 1.1


@tool(name=TOOL)
async def noop(key: int, inputs: list | None = None, deps: Any = None) -> int:
    """The no-op tool every shape calls (``inputs`` or ``deps`` carry what it reads)."""
    return key


@dataclass(frozen=True)
class Shape:
    plan: Plan
    parents: list[list[int]]
    name: str = ""
    input: Any = None  # the run's input (a map's items)


def _ref(*path: str | int) -> Reference:
    return Reference("state", tuple(path))


def _call(i: int, param: str, value: Any, out: Reference) -> Call:
    return Call(TOOL, (Param("key", Literal(i)), Param(param, value)), OutputTarget((out,)))


def _refs(ps: list[int]) -> ListValue:
    return ListValue(tuple(_ref(f"n{j}") for j in ps))


def random_parents(n: int, rng: random.Random, lo: int, hi: int, window: int) -> list[list[int]]:
    """Each call ``i`` reads ``lo``-``hi`` distinct calls among the ``window`` before it."""
    out: list[list[int]] = []
    for i in range(n):
        first = max(0, i - window)
        k = min(rng.randint(lo, hi), i - first)
        out.append(sorted(rng.sample(range(first, i), k)) if k > 0 else [])
    return out


def list_calls(parents: list[list[int]], param: str = "inputs") -> Shape:
    calls = tuple(_call(i, param, _refs(ps), _ref(f"n{i}")) for i, ps in enumerate(parents))
    return Shape(Plan(calls), parents)


def object_calls(parents: list[list[int]]) -> Shape:
    calls = []
    for i, ps in enumerate(parents):
        obj = ObjectValue(tuple((chr(ord("a") + k), _ref(f"n{j}")) for k, j in enumerate(ps)))
        calls.append(_call(i, "deps", obj, _ref(f"n{i}")))
    return Shape(Plan(tuple(calls)), parents)


def fanin(n: int) -> Shape:
    parents: list[list[int]] = [[] for _ in range(n - 1)] + [list(range(n - 1))]
    calls = [_call(i, "inputs", ListValue(()), _ref(f"n{i}")) for i in range(n - 1)]
    calls.append(_call(n - 1, "deps", _refs(parents[-1]), _ref(f"n{n - 1}")))
    return Shape(Plan(tuple(calls)), parents)


def prefix(n: int) -> Shape:
    readers = min(PREFIX_READERS, max(1, n // 2))
    writers = n - readers
    calls = [_call(i, "inputs", ListValue(()), _ref("rows", f"k{i}")) for i in range(writers)]
    calls += [_call(i, "deps", _ref("rows"), _ref(f"n{i}")) for i in range(writers, n)]
    parents = [[] for _ in range(writers)] + [list(range(writers)) for _ in range(readers)]
    return Shape(Plan(tuple(calls)), parents)


def map_items(n: int) -> Shape:
    body = (Call(TOOL, (Param("key", Reference("item", ())),), OutputTarget((Reference("local", ("r",)),))),)
    spec = MapSpec(Reference("input", ("items",)), body)
    plan = Plan((make_map_call(spec, output=OutputTarget((_ref("out"),))),))
    return Shape(plan, [[] for _ in range(n)], "map", {"items": list(range(n))})


def build(shape: str, n: int, seed: int = 1) -> Shape:
    """The ``shape`` plan of ``n`` calls (random shapes are seeded, so equal across runs)."""
    out = _build(shape, n, seed)
    return Shape(out.plan, out.parents, shape, out.input)


def _build(shape: str, n: int, seed: int) -> Shape:
    rng = random.Random(seed)
    if shape == "wide":
        return list_calls([[] for _ in range(n)])
    if shape == "chain":
        return list_calls([[i - 1] if i else [] for i in range(n)])
    if shape == "random":
        return list_calls(random_parents(n, rng, 0, 1, 20))
    if shape == "random-list":
        return list_calls(random_parents(n, rng, 1, 3, 60), "deps")
    if shape == "random-obj":
        return object_calls(random_parents(n, rng, 1, 3, 60))
    if shape == "fanin":
        return fanin(n)
    if shape == "prefix":
        return prefix(n)
    if shape == "map":
        return map_items(n)
    raise ValueError(f"unknown shape {shape!r}; expected one of {', '.join(ALL_SHAPES)}")


async def _floor(shape: Shape, fn: Callable[..., Any]) -> None:
    import asyncio

    parents = shape.parents
    n = len(parents)
    if shape.name == "map":  # one task per item, the results in item order
        items = shape.input["items"]
        await asyncio.gather(*[fn(key=v) for v in items])
        return
    results: list[Any] = [None] * n
    left = [len(ps) for ps in parents]
    children: list[list[int]] = [[] for _ in range(n)]
    for i, ps in enumerate(parents):
        for p in ps:
            children[p].append(i)
    done = asyncio.get_running_loop().create_future()
    remaining = [n]
    obj, rows = shape.name == "random-obj", shape.name == "prefix"

    def start(i: int) -> None:
        ps = parents[i]
        if obj:
            arg: Any = {chr(ord("a") + k): results[p] for k, p in enumerate(ps)}
        elif rows:
            arg = {f"k{p}": results[p] for p in ps} if ps else []
        else:
            arg = [results[p] for p in ps]
        asyncio.ensure_future(fn(key=i, deps=arg)).add_done_callback(lambda t, i=i: ended(i, t))

    def ended(i: int, task: Any) -> None:
        results[i] = task.result()
        for c in children[i]:
            left[c] -= 1
            if not left[c]:
                start(c)
        remaining[0] -= 1
        if not remaining[0]:
            done.set_result(None)

    for i in range(n):
        if not left[i]:
            start(i)
    await done


def floor(shape: Shape, fn: Callable[..., Any] | None = None) -> None:
    """Run ``shape``'s graph in bare asyncio (see the module docstring), calling ``fn``
    (default: the no-op tool's own coroutine function) once per call."""
    import asyncio

    asyncio.run(_floor(shape, fn if fn is not None else noop.func))


def parse_shapes(text: str) -> list[str]:
    """``--shapes`` value: names, ``all``, ``old`` (issue 3's) or ``new`` (issue 9's)."""
    out: list[str] = []
    for name in (s.strip() for s in text.split(",")):
        group = {"all": ALL_SHAPES, "old": OLD_SHAPES, "new": NEW_SHAPES}.get(name, (name,) if name else ())
        for s in group:
            if s not in ALL_SHAPES:
                raise SystemExit(f"unknown shape {s!r}; expected {', '.join(ALL_SHAPES)}, all, old or new")
            if s not in out:
                out.append(s)
    return out


def parse_sizes(text: str) -> list[int]:
    """``1k,10k,100k`` or plain numbers."""
    out = []
    for part in (p.strip().lower() for p in text.split(",") if p.strip()):
        scale = 1000 if part.endswith("k") else 1
        out.append(int(float(part.rstrip("k")) * scale))
    return sorted(set(out))


# ---------------------------------------------------------------------------
# time budgets: today's code is quadratic (or worse) on some shapes, so every size is
# predicted from the smaller ones first and skipped, with a message, when it would not fit.


def slope(n0: int, t0: float, n1: int, t1: float) -> float:
    """Log-log slope between two (size, seconds) points: 1.0 is linear."""
    if n0 == n1 or t0 <= 0 or t1 <= 0:
        return float("nan")
    return math.log(t1 / t0) / math.log(n1 / n0)


class Ladder:
    """Sizes measured in increasing order; predicts the next from the last two.

    The growth assumed is the last measured log-log slope, never below 1 (small sizes
    are dominated by constant costs and would predict too optimistically).
    """

    def __init__(self, budget: float):
        self.budget = budget
        self.points: list[tuple[int, float]] = []

    def predict(self, n: int) -> float | None:
        if not self.points:
            return None
        n1, t1 = self.points[-1]
        k = 1.0
        if len(self.points) >= 2:
            n0, t0 = self.points[-2]
            s = slope(n0, t0, n1, t1)
            k = s if s == s and s > 1.0 else 1.0
        return t1 * (n / n1) ** k

    def fits(self, n: int) -> bool:
        p = self.predict(n)
        return p is None or p <= self.budget

    def record(self, n: int, seconds: float) -> None:
        self.points.append((n, seconds))

    def why_not(self, n: int) -> str:
        p = self.predict(n)
        n1, t1 = self.points[-1]
        return f"skipped: predicted {p:,.0f} s > budget {self.budget:g} s (from {n1:,} calls in {t1:.2f} s)"


def probe_sizes(target: int, start: int = 125) -> list[int]:
    """Doubling sizes below ``target``, used to predict it before paying for it."""
    out, n = [], start
    while n < target:
        out.append(n)
        n *= 2
    return out


def climb(ladder: Ladder, target: int, once: Callable[[int], float], start: int = 125) -> bool:
    """Measure ``once(n)`` up the doubling sizes below ``target``; True when ``target`` fits.

    ``once`` returns seconds; its results go into ``ladder``.  Sizes already in the
    ladder are not measured again.
    """
    done = {n for n, _ in ladder.points}
    for n in probe_sizes(target, start):
        if n in done or (ladder.points and n < ladder.points[-1][0]):
            continue
        if not ladder.fits(n):
            return False
        ladder.record(n, once(n))
    return ladder.fits(target)


def fmt_bytes(b: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(b) < 1024 or unit == "GB":
            return f"{b:,.0f} {unit}" if unit == "B" else f"{b:,.1f} {unit}"
        b /= 1024
    return f"{b:.1f} GB"


def say(text: str) -> None:
    print(text, flush=True)


def traced_peak(fn: Callable[[], object]) -> int:
    """Bytes of the tracemalloc peak above what was allocated when ``fn`` started."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


class Refused(Exception):
    """A measurement the code under test refused (a diagnostic rather than a result)."""


def scaling_table(title: str, sizes: list[int], budget: float, repeat: int, memory: bool,
                  once: Callable[[int], float], peak: Callable[[int], int],
                  bytes_target: float | None = None) -> None:
    """Time per size, log-log slope to the previous size, tracemalloc peak per call.

    Shared by bench_scheduler (run) and bench_parse (load + check).  ``once(n)`` returns
    seconds or raises :class:`Refused`; ``peak(n)`` returns bytes.
    """
    say(f"  {title}")
    say(f"    {'calls':>8} {'best s':>9} {'us/call':>9} {'slope':>6}       {'peak':>10} {'per call':>10}")
    ladder = Ladder(budget)
    try:
        fits = climb(ladder, sizes[0], once)
    except Refused as exc:
        say(f"    refused below {sizes[0]:,} calls: {exc}")
        return
    if not fits:
        say(f"    {sizes[0]:>8,} {ladder.why_not(sizes[0])}")
        return
    prev: tuple[int, float] | None = None
    for n in sizes:
        if not ladder.fits(n):
            say(f"    {n:>8,} {ladder.why_not(n)}")
            break
        try:
            first = once(n)
            reps = repeat if first * repeat <= budget else 1
            t = min([first] + [once(n) for _ in range(reps - 1)])
        except Refused as exc:
            say(f"    {n:>8,} refused: {exc}")
            break
        ladder.record(n, t)
        s, flag = f"{'':>6}", "     "
        if prev is not None:
            k = slope(prev[0], prev[1], n, t)
            s, flag = f"{k:6.2f}", " ok  " if k <= SLOPE_TARGET else f" >{SLOPE_TARGET:g} "
        if memory and t * 4 <= budget:  # tracing costs about 2-4x the untraced time
            p = peak(n)
            mem = f"{fmt_bytes(p):>10} {fmt_bytes(p / n):>10}"
            if bytes_target is not None:
                mem += " ok" if p / n <= bytes_target else f" > {fmt_bytes(bytes_target)}"
        else:
            mem = f"{'(not traced: budget)' if memory else '(--no-memory)':>21}"
        say(f"    {n:>8,} {t:9.3f} {t / n * 1e6:9.1f} {s}{flag} {mem}")
        prev = (n, t)
