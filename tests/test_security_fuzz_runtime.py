"""Issue 24: the fuzzing of tests/test_security_fuzz.py extended to map bodies, JMESPath
expressions in references and streamed agent replies.  No input may raise an uncaught
exception, and no run may go past its limits.

Three fuzzers, each a small deterministic slice always on, the full job opt-in:

* ``maps``: plans with maps (nested maps, the JSON / YAML ``_map`` object) in the three forms,
  mutated with map tokens; each is read, checked, printed in every form and read back.
* ``jmespath``: references with JMESPath after the path (``†state.hits[*].url``,
  ``†{state.s | join(',', @)}``), the expression mutated; each plan is read, checked and
  printed as above, and one in ``RUN_EVERY`` is run (``sophon_dsl.run``, an echo tool,
  ``max_time=2``) against small random JSON data: nothing but ``PlanInvalid`` may escape
  ``run()``, the run ends with a status, within ``max_time`` + 1 s.
* ``stream``: agent replies (DSL and JSON forms; cut at random points, unterminated strings,
  huge comments) fed in random chunks to :class:`~sophon_dsl.llm.stream.StreamTurn` (what the
  agent feeds each streamed delta to) and closed; one in ``AGENT_EVERY`` goes through the whole
  agent (``ScriptedProvider`` -> ``Agent``, eager, one turn) instead.

The full job::

    SOPHON_FUZZ=1 .venv/bin/python -m pytest -q -s tests/test_security_fuzz_runtime.py
    SOPHON_FUZZ=1 SOPHON_FUZZ_N=300000 SOPHON_FUZZ_SEED=7 ...   # inputs per fuzzer, another seed
    SOPHON_FUZZ=1 SOPHON_FUZZ_ONLY=stream ...                    # one fuzzer
    SOPHON_FUZZ_PROGRESS=5000 ...                                # log progress and crashes as found

It prints, per fuzzer, the number of inputs, how many read cleanly, how many ran, the
slowest run, and the crashes (the mutated text's first characters, the exception); it fails
on any crash or overrun.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any, Callable

import sophon_dsl
from sophon_dsl import tool
from sophon_dsl import DiagnosticError
from sophon_dsl.loader import dumps, parse
from sophon_dsl.tools import as_registry

from test_security_fuzz import FORMS, MUTATIONS, TOKENS

SLICE = {"maps": 300, "jmespath": 300, "stream": 300}
FULL = 100_000          # per fuzzer, at least, in the full job
RUN_EVERY = 50          # one JMESPath input in RUN_EVERY is run
AGENT_EVERY = 50        # one streamed reply in AGENT_EVERY goes through the whole agent
MAX_TIME = 2.0          # the runs' max_time
OVERRUN = 1.0           # a run may end at most this long after max_time (CPU time, see below)
READ_COST = 40e-6       # CPU seconds per character a streamed reply may cost to read and check
SLICE_GUARD = 20.0      # the always-on slice: a generous hang guard only (shared machines)
PROGRESS = int(os.environ.get("SOPHON_FUZZ_PROGRESS", "0"))  # full job: a line every PROGRESS inputs
RUN_STATUSES = {"succeeded", "failed", "rejected", "cancelled"}
AGENT_STATUSES = {"succeeded", "failed", "max_turns", "rejected", "cancelled", "invalid", "provider_failed"}


@tool
def echo(v: Any = None) -> Any:
    """Give the value back."""
    return v


@tool
def f(v: Any = None) -> Any:
    """Give the value back."""
    return v


@tool
def fetch(url: str) -> dict:
    """A page."""
    return {"url": url, "text": f"page {url}"}


@tool
def translate(text: str, lang: str = "fr") -> str:
    """Translate."""
    return f"[{lang}] {text}"


TOOLS = [echo, f, fetch, translate]
REGISTRY = as_registry(TOOLS, stdlib=False)


_SHOWN: dict[str, int] = {}


def _progress(name: str, k: int, crashes: list) -> None:
    """The full job's log: a line every PROGRESS inputs, and each crash when it is found."""
    if not PROGRESS:
        return
    if k == 0:
        _SHOWN[name] = 0
    shown = _SHOWN.get(name, 0)
    if len(crashes) > shown:
        for form, head, error in crashes[shown:]:
            print(f"  {name} crash at input {k - 1:,}: [{form}] {head!r}: {error}", flush=True)
        _SHOWN[name] = len(crashes)
    if k and k % PROGRESS == 0:
        print(f"  {name}: {k:,} inputs, {len(crashes)} crash(es) [{time.strftime('%H:%M:%S')}]", flush=True)


def _mutate(rng: random.Random, text: str, tokens: list[str], rounds: tuple[int, int] = (1, 4)) -> str:
    """The plan fuzzer's mutations, with ``tokens`` (this fuzzer's own) in half the inserts."""
    for _ in range(rng.randint(*rounds)):
        if rng.random() < 0.5:
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(tokens) + text[at:]
        else:
            text = rng.choice(MUTATIONS)(rng, text)
    return text


def _forms(dsl_seeds: list[str]) -> list[tuple[str, str]]:
    """Each DSL seed in the three forms (the JSON and YAML ones printed from it)."""
    out = []
    for text in dsl_seeds:
        res = parse(text, "dsl")
        assert res.ok, (text, [str(d) for d in res.diagnostics])
        out.append(("dsl", text))
        out += [(form, dumps(res.plan, form)) for form in ("json", "yaml")]
    return out


# -- 1. map bodies ----------------------------------------------------------------------

MAP_SEEDS = [
    '$state.r = map($input.xs, as=x, concurrency=2, tolerate="10%") { $local.a = f(v=$x) ; return $local.a }\n',
    'input = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string"}}}}\n'
    '$state.pages || $state.failed = map($input.xs, as=u, index=k, concurrency=1, tolerate=1) {\n'
    '    $local.page || $local.err = fetch(url=$u)\n'
    '    $local.fr = translate(text=$local.page.text, lang="fr")\n'
    '    return {"k": $k, "fr": $local.fr || $local.err}\n'
    '}\n'
    '$state.n = echo(v=$state.pages)\n',
    '$state.rows = f(v=[[1, 2], [3]])\n'
    '$state.r = map($state.rows, as=row, index=i) {\n'
    '    $local.inner = map($row, as=cell, concurrency=1) {\n'
    '        $local.v = f(v={"c": $cell, "i": $i, "j": $index})\n'
    '        return $local.v\n'
    '    }\n'
    '    return {"row": $i, "cells": $local.inner}\n'
    '}\n'
    'return $state.r\n',
    '@timeout(5) m1: $state.a || $state.err = map(over=[1, 2, 3]) {\n'
    '    @retry(2) x1: $local.x = echo(v=$item)\n'
    '    @after(x1) $local.y = echo(v="item †{item} at †index")\n'
    '}\n'
    '@after(m1) echo(v=$state.a)\n',
    '$state.t = map(over=["a", "b"], as=s) { $local.u = translate(text=$s) ; $local.v &= echo(v={"s": $s}) ; '
    '$local.w += f(v=[$index]) }\n',
    '$state.m <<= map($state.src[*].items, as=it, tolerate=0) {\n'
    '    $local.q = map(over=$it, as=z) { $local.z = echo(v=$z) ; return $local.z || $it }\n'
    '    return $local.q\n'
    '}\n',
]

MAP_TOKENS = [
    "map(", "map($input.xs) { $local.a = f(v=$item) }", "map(over=[]) {}", " as=", "as=x", "as=input", "as=local",
    "index=", "index=x", "concurrency=", "concurrency=0", "concurrency=-1", "concurrency=1e9", "tolerate=",
    'tolerate="10%"', 'tolerate="150%"', 'tolerate="%"', "tolerate=-1", "over=", "{", "}", ";", "\n", "return ",
    "return $local", "$local.", "$local", "†local.a", "$item", "$index", "$x", "$row", "$cell", "$i[0]", "$local.a = ",
    "$state.r = ", "f(v=$x)", "echo()", "@after(c1)", "@after(m1)", "@timeout(0)", "@retry(0)", "m1: ", "x1: ",
    '"_map"', '"_map": ', '"do"', '"do": []', '"return"', '"over"', '"over": "†input.xs"', '"as"', '"as": "x"',
    '"index": "x"', '"concurrency": 0', '"tolerate": "10%"', '{"_map": {"over": [1], "do": []}}',
    '{"_map": {"over": "†item", "do": [{"_tool": "f", "v": "†item", "_outputPath": "†local.a"}]}}',
    '"_tool": "map"', '"_outputPath": "†local.x"', "_map:", "do:", "over:", "- _tool: f", "return:",
    "map($row) { $local.c = map($item) { $local.d = f(v=$item) } }",
]


def map_corpus() -> list[tuple[str, str]]:
    return _forms(MAP_SEEDS)


def fuzz_maps(n: int, seed: int) -> dict:
    rng = random.Random(seed)
    corpus = map_corpus()
    clean = 0
    crashes: list[tuple[str, str, str]] = []
    for k in range(n):
        _progress("maps", k, crashes)
        form, text = rng.choice(corpus)
        if rng.random() < 0.05:
            form = rng.choice(FORMS)
        if rng.random() < 0.4:  # readable variants: the checks behind the reader
            for _ in range(rng.randint(1, 3)):
                text = _swap(rng, text)
        else:
            text = _mutate(rng, text, MAP_TOKENS, (1, rng.choice((1, 2, 4))))
        try:
            clean += _exercise(text, form, REGISTRY)
        except Exception as exc:  # noqa: BLE001 - every exception is a finding
            crashes.append((form, text[:160], f"{type(exc).__name__}: {exc}"[:300]))
    return {"inputs": n, "clean": clean, "crashes": crashes}


def _exercise(text: str, form: str, tools: Any) -> bool:
    """What the plan fuzzer's ``exercise`` does (read; check; print in every form and read
    back), checking against ``tools``.  Returns whether it read cleanly."""
    result = parse(text, form)
    if not result.ok:
        return False
    sophon_dsl.check(result.plan, tools)
    for out_form in FORMS:
        parse(dumps(result.plan, out_form), out_form)
    return True


# map arguments and names swapped for others that keep the text readable, so that the checks
# behind the reader (E501-E509, the body's per-call checks) see many plans
MAP_SWAPS: list[tuple[str, list[str]]] = [
    ("concurrency=2", ["concurrency=0", "concurrency=-3", 'concurrency="2"', "concurrency=2.5", "concurrency=null",
                       "concurrency=99999999999999999999"]),
    ('tolerate="10%"', ['tolerate="0%"', 'tolerate="100%"', 'tolerate="250%"', 'tolerate="-1%"', 'tolerate="x%"',
                        "tolerate=-1", "tolerate=1.5", "tolerate=[]"]),
    ("as=x", ["as=input", "as=local", "as=index", "as=state", "as=data", "as=f", "as=x, index=x"]),
    ("as=row", ["as=cell", "as=index", "as=i"]), ("index=i", ["index=row", "index=index", "index=local"]),
    ("as=cell", ["as=row", "as=i"]), ("$x", ["$local.a", "$item", "$index", "$x[0].y", "${x | length(@)}", "$row"]),
    ("$local.a", ["$local.zz", "$state.a", "$local", "$local.a[0]", "$x"]), ("$input.xs", ["[]", '"s"', "$input.xs[*]",
                                                                              "$local.a", "{}", "$index"]),
    ("$cell", ["$row", "$local.v", "$i"]), ("$i,", ["$index,", "$row,", "$local.v,"]),
    ('"concurrency": 2', ['"concurrency": 0', '"concurrency": "2"', '"concurrency": -1']),
    ('"as": "x"', ['"as": "input"', '"as": 3', '"as": "index"']),
    ('"tolerate": "10%"', ['"tolerate": "101%"', '"tolerate": true', '"tolerate": "1"']),
    ("concurrency: 2", ["concurrency: 0", "concurrency: -1", "concurrency: x"]), ("as: x", ["as: input", "as: index"]),
    ("return ", ["return $local ; return ", "", "$local.r = "]), ("f(v=", ["echo(v=", "fetch(url=", "nope(v="]),
    ("echo(v=", ["f(v=", "translate(text=", "echo(w="]),
]


def _swap(rng: random.Random, text: str) -> str:
    for _ in range(3):
        old, news = rng.choice(MAP_SWAPS)
        at = text.find(old)
        if at >= 0:
            return text[:at] + rng.choice(news) + text[at + len(old):]
    return text


# -- 2. JMESPath in references -----------------------------------------------------------

QUERIES = [
    "[*].url", "[0]", "[-1]", "[1:3]", "[::-1]", "[]", "[*]", "[?a > `1`].b", "[?url != null].url",
    "[?contains(@.t, 'x')]", "[0].a.b", "[*].a[0]", "[?a == `2` || b].a",
    "| join(',', @)", "| length(@)", ".a.b", "| keys(@)", "| values(@)", "| sort(@)", "| [@, @]",
    "| {a: @, n: length(@)}", "| map(&to_string(@), @)", "| max_by(@, &a)", "| sort_by(@, &to_string(@))",
    "| to_string(@)", "| contains(@, 'x')", "| reverse(@)", "| sum(@)", "| not_null(@, 'd')",
    "| merge(@, {a: `1`})", "| type(@)", ".*", "[*][*]", "| [0] || 'x'", "| starts_with(to_string(@), 'a')",
    "| avg(@)", "| floor(@)", "| abs(@)", "| min(@)", "| to_array(@)", "| to_number(@)", '."first-name"',
    '| `{"a": 1}`', "| @", "| join('', [to_string(@), to_string(@)])", "| [@, @] | [@, @] | length(@)",
    "| map(&[@, @], @)", "[*].{u: url, t: a}", "| !@", "| @ && 'y'", "| ends_with(to_string(@), '}')",
]

JMES_TOKENS = [
    "@", "|", "||", "&&", "!", "[", "]", "{", "}", "(", ")", ",", ".", "*", "?", "&", "`", "'", '"', ":", "-1", "0",
    "[@, @]", "join(',', @)", "join('', [@, @])", "length(@)", "to_string(@)", "[?a > `1`]", "[*]", "[]", "[0]",
    "[::-1]", "[1:2:0]", "| ", " || ", "{a: @}", "&a", "sort_by(@, &a)", "max_by(@, &a)", "`null`", "`[1,2]`",
    "\\", "\\u", "'\\'", "9" * 40, "-" * 3, "a" * 60, "†", "$", "\n", " ", "}}", "{{", "$state.d", "†{state.d}",
]

DATA_LEAVES: list[Any] = [None, True, False, 0, -1, 1.5, 10 ** 20, "", "x", "a,b", "†state.x", "😀", "\u202e"]


def random_data(rng: random.Random, depth: int = 0) -> Any:
    """Small random JSON data, with the keys the seed queries use now and then."""
    r = rng.random()
    if depth >= 3 or r < 0.35:
        return rng.choice(DATA_LEAVES)
    if r < 0.7:
        return [random_data(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["a", "b", "t", "url", "first-name", "items", "x"]
    return {rng.choice(keys): random_data(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _reference(kind_path: str, query: str, braced: bool) -> str:
    if braced or not query.startswith("["):
        return "${" + kind_path + (" " if query[:1] not in ".[" else "") + query + "}"
    return "$" + kind_path + query


def jmespath_plan(rng: random.Random, query: str) -> str:
    """A tiny plan applying ``query`` to ``†state.d`` (and ``†input.d``) in several places."""
    ref = _reference("state.d", query, rng.random() < 0.3)
    shape = rng.randrange(5)
    head = "$state.d = echo(v=$input.d)\n"
    if shape == 0:
        body = f"$state.r = echo(v={ref})\n"
    elif shape == 1:
        body = f'$state.r = echo(v="at †{{state.d {query}}} end")\n'.replace("{state.d [", "{state.d[")
    elif shape == 2:
        body = f"$state.r || $state.e = echo(v={ref} || $input.d)\n"
    elif shape == 3:
        body = f"$state.r = map({ref}, as=x) {{ $local.a = echo(v=$x) }}\n"
    else:
        body = f"$state.r = echo(v={_reference('input.d', query, True)})\n"
    return head + body + "return $state.r\n"


def fuzz_jmespath(n: int, seed: int, run_every: int = RUN_EVERY) -> dict:
    rng = random.Random(seed)
    clean = ran = overruns = 0
    slowest = slowest_cpu = 0.0
    crashes: list[tuple[str, str, str]] = []
    due = True  # a run is due: the next input that reads cleanly runs
    for k in range(n):
        _progress("jmespath", k, crashes)
        due = due or k % run_every == 0
        query = rng.choice(QUERIES)
        if rng.random() < 0.7:
            query = _mutate(rng, query, JMES_TOKENS, (1, 3))
        text = jmespath_plan(rng, query)
        if rng.random() < 0.1:  # now and then the plan around it too
            text = _mutate(rng, text, JMES_TOKENS, (1, 2))
        form = "dsl"
        if rng.random() < 0.2:  # the same plan as JSON or YAML, when it reads
            res = parse(text, "dsl")
            if res.ok:
                form = rng.choice(("json", "yaml"))
                text = dumps(res.plan, form)
        try:
            ok = _exercise(text, form, REGISTRY)
            clean += ok
        except Exception as exc:  # noqa: BLE001
            crashes.append((form, text[:160], f"{type(exc).__name__}: {exc}"[:300]))
            continue
        if not ok or not due:
            continue
        due = False
        ran += 1
        data = random_data(rng)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            result = sophon_dsl.run(parse(text, form).plan, tools=[echo], input={"d": data}, max_time=MAX_TIME)
            status = result.status
        except DiagnosticError:
            status = "invalid"
        except Exception as exc:  # noqa: BLE001
            crashes.append(("run", text[:160], f"{type(exc).__name__}: {exc}"[:300]))
            continue
        took, used = time.perf_counter() - start, time.process_time() - cpu
        slowest, slowest_cpu = max(slowest, took), max(slowest_cpu, used)
        if status not in RUN_STATUSES | {"invalid"}:
            crashes.append(("run", text[:160], f"status {status!r}"))
        if used > MAX_TIME + OVERRUN:  # CPU time: a machine shared with other jobs stretches wall time
            overruns += 1
            crashes.append(("overrun", text[:160], f"ran {used:.1f} s of CPU ({took:.1f} s), max_time {MAX_TIME} s; "
                                                   f"data {data!r:.80}"))
    return {"inputs": n, "clean": clean, "ran": ran, "slowest": slowest, "slowest_cpu": slowest_cpu,
            "overruns": overruns,
            "crashes": crashes}


# -- 3. streamed agent replies -----------------------------------------------------------

REPLY_SEEDS: list[tuple[str, str]] = [
    ("dsl", '$state.a = echo(v="hi")\n$state.b = f(v=$state.a)\nreturn {"a": $state.a, "b": $state.b}\n'),
    ("dsl", "```dsl\n# fetch then translate\n$state.p = fetch(url=\"https://e.x/1\")\n"
            "$state.t = translate(text=$state.p.text)\n```\nreturn $state.t\n"),
    ("dsl", MAP_SEEDS[0] + "return $state.r\n"),
    ("dsl", MAP_SEEDS[2]),
    ("dsl", "@risk(high) @retry(2)\n$state.x = echo(v=[1, 2, {\"k\": \"v\"}]); $state.y = echo(v=$state.x[*])\n"
            "$state.z = echo(v=${state.x | length(@)})\nreturn $state.z\n"),
    ("dsl", 'goal = "g"\ntool t = {"description": "d", "input": {"type": "object"}}\n'
            '$state.o = t(a=1) -> {"ok": true}\nreturn $state.o\n'),
    ("json", '{"calls": [{"_tool": "echo", "v": "hi", "_outputPath": "†state.a"}, '
             '{"_tool": "f", "v": "†state.a", "_outputPath": "†state.b"}], "output": "†state.b"}'),
    ("json", '[{"_tool": "echo", "v": [1, 2], "_outputPath": "†state.xs"}, '
             '{"_map": {"over": "†state.xs", "as": "x", "do": [{"_tool": "f", "v": "†x", '
             '"_outputPath": "†local.a"}]}, "_outputPath": "†state.m"}]'),
    ("json", '```json\n{"goal": "g", "calls": [{"_tool": "fetch", "url": "https://e.x", '
             '"_outputPath": "†state.p || †state.err"}], "output": {"p": "†state.p"}}\n```'),
]

REPLY_TOKENS = TOKENS + MAP_TOKENS[:20] + [
    "```", "```dsl\n", "```json\n", "\n```\n", "# " + "c" * 200, "#", '"unterminated', "'unterminated", "return ",
    "return {", "}\n", "; ", '{"calls": [', '"output": ', "]}", "{", "},", '"_tool": "echo"', '"v": "†state.a"',
]


def _stream_mutate(rng: random.Random, text: str) -> str:
    r = rng.random()
    if r < 0.15:  # cut at a random point
        return text[:rng.randrange(len(text) + 1)]
    if r < 0.25:  # an unterminated string, then the rest (or nothing)
        at = rng.randrange(len(text) + 1)
        return text[:at] + rng.choice('"\'`') + "x" * rng.randint(0, 2000) + (text[at:] if rng.random() < 0.5 else "")
    if r < 0.32:  # a huge comment (or many), with or without its newline
        at = rng.randrange(len(text) + 1)
        size = rng.choice((100, 100, 5_000, 5_000, 60_000))
        comment = "# " + "c" * size if rng.random() < 0.5 else "# c\n" * (size // 4)
        return text[:at] + comment + ("\n" if rng.random() < 0.5 else "") + text[at:]
    if r < 0.35:  # blank lines / fences before anything
        return rng.choice(("\n", " ", "```\n", "\t")) * rng.choice((10, 10, 1000, 1000, 20_000)) + text
    return _mutate(rng, text, REPLY_TOKENS)


def _chunks(rng: random.Random, text: str) -> list[str]:
    out, i = [], 0
    big = rng.random() < 0.2
    while i < len(text):
        size = rng.randint(1, 4096) if big else rng.randint(1, 48)
        out.append(text[i:i + size])
        i += size
    return out


def stream_reply(text: str, chunks: list[str], cut: bool, mode: str = "eager") -> Any:
    """What the agent does with a reply's deltas (nothing dispatched): feed each, then close."""
    from sophon_dsl.llm.stream import StreamTurn

    turn = StreamTurn(REGISTRY, mode=mode, input={"d": [1, 2]}, dispatch=False)
    for delta in chunks:
        turn.feed(delta)
    turn.cut = cut
    plan = turn.close_stream()
    return plan, turn.errors


def agent_reply(text: str, chunk: int) -> str:
    """The whole agent on one scripted reply: eager, one turn, nothing approved."""
    from sophon_dsl.llm.agent import Agent
    from sophon_dsl.llm.providers.scripted import ScriptedProvider

    provider = ScriptedProvider([{"reply": text, "chunk_size": chunk}], cycle=False)
    agent = Agent(provider, TOOLS, stdlib=False, approve="no", max_turns=1,
                  run_options={"max_time": MAX_TIME})
    return agent.run("fuzz", input={"d": [1, 2]}).status


def fuzz_stream(n: int, seed: int, agent_every: int = AGENT_EVERY) -> dict:
    rng = random.Random(seed)
    clean = ran = overruns = 0
    slowest = slowest_cpu = 0.0
    crashes: list[tuple[str, str, str]] = []
    for k in range(n):
        _progress("stream", k, crashes)
        form, text = rng.choice(REPLY_SEEDS)
        for _ in range(rng.randint(1, 2)):
            text = _stream_mutate(rng, text)
        start, cpu = time.perf_counter(), time.process_time()
        agent = k % agent_every == 0
        try:
            if agent:
                ran += 1
                status = agent_reply(text, rng.choice((1, 7, 16, 64, 4096)))
                if status not in AGENT_STATUSES:
                    crashes.append(("agent", text[:160], f"status {status!r}"))
            else:
                _plan, errors = stream_reply(text, _chunks(rng, text), rng.random() < 0.1,
                                             "lazy" if rng.random() < 0.3 else "eager")
                clean += not errors
        except Exception as exc:  # noqa: BLE001
            crashes.append((form, text[:160], f"{type(exc).__name__}: {exc}"[:300]))
            continue
        took, used = time.perf_counter() - start, time.process_time() - cpu
        slowest, slowest_cpu = max(slowest, took), max(slowest_cpu, used)
        # an agent run ends within max_time + 1 s (its warm-up aside); reading a reply costs about
        # its length (the statement splitter: some 10 us a character), never its square
        limit = MAX_TIME + OVERRUN + (2.0 if agent else 0.0) + READ_COST * len(text)
        if used > limit:
            overruns += 1
            crashes.append(("overrun", text[:160],
                            f"{'agent' if agent else 'read'} {used:.1f} s of CPU ({took:.1f} s), "
                            f"{len(text):,} characters"))
    return {"inputs": n, "clean": clean, "ran": ran, "slowest": slowest, "slowest_cpu": slowest_cpu,
            "overruns": overruns,
            "crashes": crashes}


FUZZERS: dict[str, Callable[..., dict]] = {"maps": fuzz_maps, "jmespath": fuzz_jmespath, "stream": fuzz_stream}


def _report(name: str, seed: int, out: dict, took: float) -> str:
    extra = ""
    if "ran" in out:
        extra = (f", {out['ran']:,} run (slowest {out['slowest']:.2f} s, {out['slowest_cpu']:.2f} s of CPU; "
                 f"{out['overruns']} overrun(s))")
    lines = [f"fuzz {name}: {out['inputs']:,} inputs (seed {seed}) in {took:.0f} s, {out['clean']:,} clean"
             f"{extra}, {len(out['crashes'])} crash(es)"]
    lines += [f"  [{form}] {head!r}: {error}" for form, head, error in out["crashes"][:20]]
    return "\n".join(lines)


def _slice(name: str) -> dict:
    import pytest

    seed = int(os.environ.get("SOPHON_FUZZ_SEED", "24"))
    out = FUZZERS[name](SLICE[name], seed)
    # the slice keeps only a generous hang guard: a busy machine must not fail it
    real = [c for c in out["crashes"] if c[0] != "overrun"]
    assert real == [], real[:5]
    assert out.get("slowest_cpu", 0.0) < MAX_TIME + SLICE_GUARD
    if out["clean"] == 0:
        pytest.fail(f"{name}: no input read cleanly; the mutations are too strong to exercise the printers")
    return out


def test_fuzz_maps_slice():
    _slice("maps")


def test_fuzz_jmespath_slice():
    out = _slice("jmespath")
    assert out["ran"] > 0


def test_fuzz_stream_slice():
    out = _slice("stream")
    assert out["ran"] > 0


def test_fuzz_runtime_full_job():
    """The fuzzers take turns, BLOCK inputs each (block b of seed S uses seed S * 100003 + b), so
    a job stopped early has exercised all three alike."""
    import pytest

    if os.environ.get("SOPHON_FUZZ") != "1":
        pytest.skip("opt-in: SOPHON_FUZZ=1 runs the full job (>= 100,000 inputs per fuzzer)")
    n = max(int(os.environ.get("SOPHON_FUZZ_N", FULL)), FULL)
    seed = int(os.environ.get("SOPHON_FUZZ_SEED", "1"))
    only = [x for x in os.environ.get("SOPHON_FUZZ_ONLY", ",".join(FUZZERS)).split(",") if x]
    block = int(os.environ.get("SOPHON_FUZZ_BLOCK", "5000"))
    totals = {name: {"inputs": 0, "clean": 0, "ran": 0, "slowest": 0.0, "slowest_cpu": 0.0, "overruns": 0,
                     "crashes": []} for name in only}
    took = dict.fromkeys(only, 0.0)
    begin = time.perf_counter()
    for b in range((n + block - 1) // block):
        for name in only:
            start = time.perf_counter()
            out = FUZZERS[name](min(block, n - b * block), seed * 100003 + b)
            took[name] += time.perf_counter() - start
            tot = totals[name]
            for key in ("inputs", "clean", "ran", "overruns"):
                tot[key] += out.get(key, 0)
            for key in ("slowest", "slowest_cpu"):
                tot[key] = max(tot[key], out.get(key, 0.0))
            tot["crashes"] += out["crashes"]
        print(f"block {b}: " + ", ".join(f"{name} {totals[name]['inputs']:,} ({len(totals[name]['crashes'])} crash(es))"
                                         for name in only)
              + f" in {time.perf_counter() - begin:.0f} s [{time.strftime('%H:%M:%S')}]", flush=True)
    failed = []
    for name in only:
        print("\n" + _report(name, seed, totals[name], took[name]), flush=True)
        failed += totals[name]["crashes"]
    total = sum(t["inputs"] for t in totals.values())
    print(f"\nfuzz runtime: {total:,} inputs in {time.perf_counter() - begin:.0f} s, {len(failed)} finding(s)")
    assert failed == []
