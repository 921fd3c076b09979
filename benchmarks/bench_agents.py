"""Agent benchmark (issue 30): sophon-dsl's agent against LangGraph's ReAct agent, on one simulated model.

A simulated OpenAI-compatible server (Chat Completions, streamed as server-sent events or
whole) answers every approach with the same latency model: the first token comes
``--ttft`` + prompt tokens / ``--prompt-tps`` seconds after the request, then
``--output-tps`` tokens per second, sent ``--chunk-tokens`` tokens per chunk.  Tokens are
cl100k (tiktoken) counts of the real request payloads: every message's text and tool calls,
the tool schemas, the system prompt.

Tasks are data (``benchmarks/agent_tasks.yaml``, or ``--tasks FILE``): a DAG of tool calls
(tool, arguments, dependencies through ``"$id"`` references, latency, result) plus the final
answer.  Each approach's model replies are derived from the DAG mechanically:

* ``react``: LangGraph's ``create_react_agent`` + ``langchain_openai.ChatOpenAI(base_url=...)``;
  the model asks for one tool call per turn, in dependency order, then answers;
* ``parallel_fc``: the same loop; the model asks for one turn of parallel tool calls per wave
  of the DAG (the calls whose inputs are all known), then answers;
* ``plan_execute``: sophon-dsl's agent (``--provider openai`` against the server) reading the
  whole reply before running anything (``Agent(dispatch="after_reply")``): the plan in the DSL;
* ``sophon_stream``: sophon-dsl's agent with default settings: the same plan, each call
  dispatched as its line streams;
* ``sophon_written`` (not run unless named): the same in written stream order
  (``Agent(stream_order="written")``), the reference for the default order.

The tools are real ``async`` functions: they sleep their latency, check that their arguments
are the ones the DAG says (a reference resolved to the value it reads) and return the result.
Each run is checked: every call of the DAG ran once, and the final answer is the task's.

Per task and approach: the median over ``--repeat`` runs (alternated, the approaches'
order rotating) of the wall time, the model requests, the input and output tokens.  For
``sophon_stream`` also the **stream limit**: when the last call would end if every call
started the moment its own line had streamed and its inputs were written (from the
server's chunk times and the tools' latencies), or when the reply ends if later.

Run: python benchmarks/bench_agents.py [--repeat 3] [--json OUT] [--tasks FILE] [--only a,b]
         [--approaches react,parallel_fc,plan_execute,sophon_stream]
         [--ttft 0.4] [--prompt-tps 5000] [--output-tps 60] [--chunk-tokens 1]
Needs the ``bench`` extra (langgraph, langchain-openai) for react and parallel_fc; without it
those approaches are skipped with a message.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

APPROACHES = ("react", "parallel_fc", "plan_execute", "sophon_stream")
# also measurable (--approaches ...,sophon_written): the same agent in written stream order, the
# reference of issue 30 item 6 (the default order within 2% of it)
EXTRA_APPROACHES = ("sophon_written",)
LANGGRAPH_PROMPT = "You are a helpful assistant. Use the tools to answer the user's question."


# ---------------------------------------------------------------------------
# Tasks


@dataclass
class Node:
    """A top-level entry of a task: one call, or a map (one call per item)."""

    id: str
    tool: str
    args: Any                  # a call's arguments ("$id" references unresolved); None for a map
    latency: float
    result: Any                # a map: the list of its items' results
    deps: list[str]
    map: dict | None = None    # {param, over, results}


@dataclass
class Step:
    """One tool call as it runs (a map's item is one)."""

    id: str
    node: str
    tool: str
    args: dict                 # resolved
    latency: float
    result: Any


@dataclass
class Task:
    name: str
    question: str
    tools: dict[str, dict]
    nodes: list[Node]
    answer: Any

    def results(self) -> dict[str, Any]:
        return {n.id: n.result for n in self.nodes}

    def steps(self) -> list[Step]:
        res = self.results()
        out: list[Step] = []
        for n in self.nodes:
            if n.map is None:
                out.append(Step(n.id, n.id, n.tool, resolve(n.args, res), n.latency, n.result))
            else:
                for k, (item, r) in enumerate(zip(n.map["over"], n.map["results"])):
                    out.append(Step(f"{n.id}[{k}]", n.id, n.tool, {n.map["param"]: item}, n.latency, r))
        return out

    def waves(self) -> dict[str, int]:
        wave: dict[str, int] = {}
        for n in self.nodes:   # (written in dependency order: checked at load)
            wave[n.id] = 1 + max((wave[d] for d in n.deps), default=-1)
        return wave

    def final_answer(self) -> Any:
        return resolve(self.answer, self.results())

    @property
    def size(self) -> int:
        return len(self.steps())


def _ref(value: Any, ids: set[str]) -> tuple[str, list[str]] | None:
    """``"$id.a.b"`` -> ("id", ["a", "b"]) when ``id`` is a call of the task."""
    if isinstance(value, str) and value.startswith("$"):
        head, *path = value[1:].split(".")
        if head in ids:
            return head, path
    return None


def refs(value: Any, ids: set[str]) -> list[str]:
    r = _ref(value, ids)
    if r is not None:
        return [r[0]]
    if isinstance(value, list):
        return [x for v in value for x in refs(v, ids)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in refs(v, ids)]
    return []


def resolve(value: Any, results: dict[str, Any]) -> Any:
    r = _ref(value, set(results))
    if r is not None:
        out = results[r[0]]
        for key in r[1]:
            out = out[key]
        return out
    if isinstance(value, list):
        return [resolve(v, results) for v in value]
    if isinstance(value, dict):
        return {k: resolve(v, results) for k, v in value.items()}
    return value


def load_tasks(path: Path) -> list[Task]:
    doc = yaml.safe_load(path.read_text())
    tasks = []
    for name, t in doc["tasks"].items():
        ids: set[str] = set()
        nodes = []
        for c in t["calls"]:
            if "map" in c:
                m = c["map"]
                if len(m["over"]) != len(m["results"]):
                    raise SystemExit(f"{path}: task {name}, map {c['id']}: one result per item")
                deps = refs(m["over"], ids)
                nodes.append(Node(c["id"], m["tool"], None, float(m["latency"]), list(m["results"]), deps,
                                  {"param": m["param"], "over": m["over"], "results": m["results"]}))
            else:
                deps = refs(c.get("args") or {}, set(ids) | {c["id"]})
                if c["id"] in deps or any(d not in ids for d in deps):
                    raise SystemExit(f"{path}: task {name}, call {c['id']}: reads a call written after it")
                nodes.append(Node(c["id"], c["tool"], c.get("args") or {}, float(c["latency"]), c["result"],
                                  sorted(set(deps), key=[n.id for n in nodes].index)))
            if c["id"] in ids:
                raise SystemExit(f"{path}: task {name}: call id {c['id']} twice")
            ids.add(c["id"])
            if nodes[-1].tool not in t["tools"]:
                raise SystemExit(f"{path}: task {name}, call {c['id']}: unknown tool {nodes[-1].tool}")
        tasks.append(Task(name, t["question"], t["tools"], nodes, t["answer"]))
    return tasks


# ---------------------------------------------------------------------------
# The model's replies, derived from the DAG


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def react_replies(task: Task) -> list[tuple[str, Any]]:
    """One tool call per turn in dependency order (wave, then as written), then the answer."""
    wave = task.waves()
    steps = sorted(task.steps(), key=lambda s: wave[s.node])   # (a stable sort keeps written order)
    return [("tools", [(s.tool, s.args)]) for s in steps] + [("text", compact(task.final_answer()))]


def parallel_replies(task: Task) -> list[tuple[str, Any]]:
    """One turn of parallel tool calls per wave, then the answer."""
    wave = task.waves()
    steps = task.steps()
    out = []
    for w in sorted(set(wave.values())):
        out.append(("tools", [(s.tool, s.args) for s in steps if wave[s.node] == w]))
    return out + [("text", compact(task.final_answer()))]


def dsl_value(value: Any, ids: set[str]) -> str:
    r = _ref(value, ids)
    if r is not None:
        return "$state." + ".".join([r[0], *r[1]])
    if isinstance(value, list):
        return "[" + ",".join(dsl_value(v, ids) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k if k.isidentifier() else compact(k)}:{dsl_value(v, ids)}"
                              for k, v in value.items()) + "}"
    return compact(value)


def dsl_reply(task: Task) -> str:
    """The plan in the DSL, one line per call (a map for a map), then ``return``."""
    ids = {n.id for n in task.nodes}
    lines = []
    for n in task.nodes:
        if n.map is None:
            args = ",".join(f"{k}={dsl_value(v, ids)}" for k, v in n.args.items())
            lines.append(f"$state.{n.id} = {n.tool}({args})")
        else:
            lines.append(f"$state.{n.id} = map(over={dsl_value(n.map['over'], ids)},as=x) "
                         f"{{$local.r = {n.tool}({n.map['param']}=$x);return $local.r}}")
    lines.append(f"return {dsl_value(task.answer, ids)}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# The tools: real functions that sleep, check their arguments, return the result


class ToolBox:
    """The task's tools for one run at a time: each call must match a step of the DAG not yet run."""

    def __init__(self, task: Task):
        self.task = task
        self.steps = task.steps()
        self.reset()

    def reset(self) -> None:
        self.ran: dict[str, tuple[float, float]] = {}
        self.errors: list[str] = []

    async def call(self, tool_name: str, args: dict) -> Any:
        norm = compact(args)
        for s in self.steps:
            if s.tool == tool_name and s.id not in self.ran and compact(s.args) == norm:
                t = time.perf_counter()
                self.ran[s.id] = (t, t)
                await asyncio.sleep(s.latency)
                self.ran[s.id] = (t, time.perf_counter())
                return s.result
        self.errors.append(f"{tool_name}({norm}): no call of the task has these arguments")
        raise ValueError(f"{tool_name}: unexpected arguments {norm}")

    def functions(self) -> list[Callable]:
        """One ``async def`` per tool, with a real signature (both frameworks read it)."""
        py = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "array": "list",
              "object": "dict"}
        out = []
        for name, decl in self.task.tools.items():
            params = decl.get("params") or {}
            sig = ", ".join(f"{p}: {py[t]}" for p, t in params.items())
            body = "{" + ", ".join(f"{p!r}: {p}" for p in params) + "}"
            src = (f"async def {name}({sig}) -> {py.get(decl.get('returns'), 'Any')}:\n"
                   f"    return await _box.call({name!r}, {body})\n")
            ns: dict[str, Any] = {"_box": self, "Any": Any}
            exec(src, ns)  # the benchmark's own tool declarations
            fn = ns[name]
            fn.__doc__ = decl.get("description", name)
            out.append(fn)
        return out


# ---------------------------------------------------------------------------
# The simulated model server


@dataclass
class LatencyModel:
    ttft: float = 0.4            # s before the first token, plus the prompt's time below
    prompt_tps: float = 5000.0   # prompt tokens read per second
    output_tps: float = 60.0     # tokens written per second
    chunk_tokens: int = 1        # tokens per streamed chunk

    def to_json(self) -> dict:
        return {"ttft_s": self.ttft, "prompt_tokens_per_s": self.prompt_tps,
                "output_tokens_per_s": self.output_tps, "chunk_tokens": self.chunk_tokens,
                "tokenizer": "cl100k"}


@dataclass
class Served:
    """One request: when it came, its tokens, when each chunk of text was sent."""

    arrived: float
    input_tokens: int
    output_tokens: int = 0
    chunks: list[tuple[int, float]] = field(default_factory=list)   # (end offset in the text, time sent)
    text: str = ""
    ended: float = 0.0


def _encoder() -> Any:
    from sophon_dsl.llm.prompt import _encoder as enc

    return enc()


class SimServer:
    """The simulated model (see the module docstring).  ``begin(replies)`` sets the replies of
    the next run; each request takes the next one."""

    def __init__(self, model: LatencyModel):
        self.model = model
        self.enc = _encoder()
        self._lock = threading.Lock()
        self.replies: list[tuple[str, Any]] = []
        self.served: list[Served] = []
        self.calls = 0
        self._httpd: ThreadingHTTPServer | None = None

    def begin(self, replies: list[tuple[str, Any]]) -> None:
        with self._lock:
            self.replies = list(replies)
            self.served = []

    def tokens(self, text: str) -> list[int]:
        return self.enc.encode(text, disallowed_special=())

    def prompt_tokens(self, body: dict) -> int:
        n = 0
        for m in body.get("messages") or []:
            content = m.get("content")
            if isinstance(content, list):   # content parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            n += 4 + len(self.tokens(str(m.get("role", "")) + (content or "")))
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                n += len(self.tokens(fn.get("name", "") + fn.get("arguments", "")))
            if m.get("tool_call_id"):
                n += len(self.tokens(m["tool_call_id"]))
        if body.get("tools"):
            n += len(self.tokens(compact(body["tools"])))
        return n

    def take(self) -> tuple[str, Any] | None:
        with self._lock:
            return self.replies.pop(0) if self.replies else None

    # -- lifecycle
    def start(self) -> "SimServer":
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server_owner: SimServer
    protocol_version = "HTTP/1.0"   # close-delimited bodies

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _event(self, data: Any) -> None:
        self.wfile.write(f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def do_POST(self) -> None:
        arrived = time.perf_counter()
        owner = self.server_owner
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        reply = owner.take()
        if reply is None:
            self._json(400, {"error": {"message": "bench server: no reply left for this run",
                                       "type": "invalid_request_error"}})
            return
        served = Served(arrived, owner.prompt_tokens(body))
        with owner._lock:
            owner.served.append(served)
            owner.calls += 1
            n = owner.calls
        m = owner.model
        first = arrived + m.ttft + served.input_tokens / m.prompt_tps
        # pieces: (tool call index or None, kind, text); tokens come one every 1/output_tps s
        kind, payload = reply
        pieces: list[tuple[int | None, str, list[int]]] = []
        if kind == "text":
            pieces.append((None, "content", owner.tokens(payload)))
        else:
            for i, (name, args) in enumerate(payload):
                pieces.append((i, "name:" + name, owner.tokens(name)))
                pieces.append((i, "arguments", owner.tokens(compact(args))))
        served.output_tokens = sum(len(p[2]) for p in pieces)
        try:
            if body.get("stream"):
                self._stream(body, n, kind, payload, pieces, first, served)
            else:
                self._whole(body, n, kind, payload, first, served)
        except (BrokenPipeError, ConnectionResetError):
            pass
        served.ended = time.perf_counter()

    @staticmethod
    def _sleep_until(t: float) -> None:
        d = t - time.perf_counter()
        if d > 0:
            time.sleep(d)

    def _message(self, n: int, kind: str, payload: Any) -> dict:
        if kind == "text":
            return {"role": "assistant", "content": payload}
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": compact(args)}}
            for i, (name, args) in enumerate(payload)]}

    def _whole(self, body: dict, n: int, kind: str, payload: Any, first: float, served: Served) -> None:
        m = self.server_owner.model
        self._sleep_until(first + max(served.output_tokens - 1, 0) / m.output_tps)
        self._json(200, {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                         "model": body.get("model", "sim"),
                         "choices": [{"index": 0, "message": self._message(n, kind, payload), "logprobs": None,
                                      "finish_reason": "stop" if kind == "text" else "tool_calls"}],
                         "usage": {"prompt_tokens": served.input_tokens, "completion_tokens": served.output_tokens,
                                   "total_tokens": served.input_tokens + served.output_tokens}})
        if kind == "text":
            served.text = payload
            served.chunks.append((len(payload), time.perf_counter()))

    def _stream(self, body: dict, n: int, kind: str, payload: Any, pieces: list, first: float,
                served: Served) -> None:
        owner = self.server_owner
        m = owner.model
        created = int(time.time())

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": created,
                    "model": body.get("model", "sim"),
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self._event(chunk({"role": "assistant", "content": None if kind != "text" else ""}))
        j = 0            # tokens generated so far
        offset = 0       # characters of text sent so far
        enc = owner.enc
        size = max(1, m.chunk_tokens)
        for index, what, toks in pieces:
            if what.startswith("name:"):   # a tool call opens with its id and name, once its name is generated
                j += len(toks)
                self._sleep_until(first + (j - 1) / m.output_tps)
                self._event(chunk({"tool_calls": [{"index": index, "id": f"call_{n}_{index}", "type": "function",
                                                   "function": {"name": what[5:], "arguments": ""}}]}))
                continue
            dec = codecs.getincrementaldecoder("utf-8")("replace")
            for k in range(0, len(toks), size):
                group = toks[k:k + size]
                j += len(group)
                text = dec.decode(b"".join(enc.decode_single_token_bytes(t) for t in group))
                self._sleep_until(first + (j - 1) / m.output_tps)
                if index is None:
                    self._event(chunk({"content": text}))
                    offset += len(text)
                    served.chunks.append((offset, time.perf_counter()))
                else:
                    self._event(chunk({"tool_calls": [{"index": index, "function": {"arguments": text}}]}))
        if kind == "text":
            served.text = payload
        self._event(chunk({}, "stop" if kind == "text" else "tool_calls"))
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": created,
                         "model": body.get("model", "sim"), "choices": [],
                         "usage": {"prompt_tokens": served.input_tokens, "completion_tokens": served.output_tokens,
                                   "total_tokens": served.input_tokens + served.output_tokens}})
        self._event("[DONE]")


# ---------------------------------------------------------------------------
# The stream limit


def stream_limit(task: Task, served: Served, t0: float) -> float:
    """When the last call would end if each call started as soon as its own line had streamed
    and its inputs were written (or when the reply ended, if later), from ``t0``."""
    text = served.text
    ends = [i for i, ch in enumerate(text) if ch == "\n"]   # each statement ends at its newline

    def sent(offset: int) -> float:   # when the chunk holding character ``offset`` was sent
        for end, t in served.chunks:
            if end > offset:
                return t
        return served.chunks[-1][1]

    end: dict[str, float] = {}
    for k, n in enumerate(task.nodes):
        ready = max([sent(ends[k])] + [end[d] for d in n.deps])
        end[n.id] = ready + n.latency
    return max(max(end.values()), served.chunks[-1][1]) - t0


# ---------------------------------------------------------------------------
# Running the approaches


@dataclass
class Sample:
    latency_s: float
    llm_requests: int
    input_tokens: int
    output_tokens: int
    stream_limit_s: float | None = None
    error: str | None = None


class Runner:
    def __init__(self, task: Task, server: SimServer):
        self.task = task
        self.server = server
        self.box = ToolBox(task)
        self.fns = self.box.functions()
        self.expected = task.final_answer()
        self._graph: Any = None
        self._agents: dict[str, Any] = {}

    def graph(self) -> Any:
        if self._graph is None:
            from langchain_core.tools import StructuredTool
            from langchain_openai import ChatOpenAI
            import warnings

            with warnings.catch_warnings():  # (moved to langchain.agents in LangGraph 1.0; the issue names this one)
                warnings.simplefilter("ignore")
                from langgraph.prebuilt import create_react_agent

            llm = ChatOpenAI(model="sim-model", base_url=self.server.base_url, api_key="sk-bench", streaming=True,
                             max_retries=0, temperature=0)
            tools = [StructuredTool.from_function(coroutine=f, name=f.__name__, description=f.__doc__)
                     for f in self.fns]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._graph = create_react_agent(llm, tools, prompt=LANGGRAPH_PROMPT)
        return self._graph

    def agent(self, approach: str) -> Any:
        if approach not in self._agents:
            from sophon_dsl.llm.agent import Agent
            from sophon_dsl.llm.providers.openai import OpenAIProvider
            from sophon_dsl.tools import tool

            provider = OpenAIProvider("sim-model", base_url=self.server.base_url, api_key="sk-bench")
            tools = [tool(f, name=f.__name__, description=f.__doc__) for f in self.fns]
            kw = {"plan_execute": {"dispatch": "after_reply"},
                  "sophon_written": {"stream_order": "written"}}.get(approach, {})
            self._agents[approach] = Agent(provider, tools=tools, stdlib=False, **kw)
        return self._agents[approach]

    async def run(self, approach: str) -> Sample:
        task, srv, box = self.task, self.server, self.box
        if approach == "react":
            replies = react_replies(task)
        elif approach == "parallel_fc":
            replies = parallel_replies(task)
        else:
            replies = [("text", dsl_reply(task))]
        runner = self.graph() if approach in ("react", "parallel_fc") else self.agent(approach)
        srv.begin(replies)
        box.reset()
        error = None
        t0 = time.perf_counter()
        if approach in ("react", "parallel_fc"):
            out = await runner.ainvoke({"messages": [("user", task.question)]}, config={"recursion_limit": 500})
            latency = time.perf_counter() - t0
            try:
                answer = json.loads(out["messages"][-1].content)
            except (ValueError, TypeError):
                answer = out["messages"][-1].content
        else:
            result = await runner.arun(task.question)
            latency = time.perf_counter() - t0
            answer = result.output
            if not result.ok:
                error = f"agent {result.status}: {result.error} {[t.errors for t in result.turns]}"
        if error is None and compact(answer) != compact(self.expected):
            error = f"wrong answer {compact(answer)[:200]}"
        missing = [s.id for s in box.steps if s.id not in box.ran]
        if error is None and (missing or box.errors):
            error = f"calls not run {missing[:5]}; {box.errors[:3]}"
        served = list(srv.served)
        limit = None
        if approach in ("sophon_stream", "sophon_written") and served and served[0].chunks:
            limit = stream_limit(task, served[0], t0)
        return Sample(latency, len(served), sum(s.input_tokens for s in served),
                      sum(s.output_tokens for s in served), limit, error)


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


async def bench(tasks: list[Task], approaches: list[str], model: LatencyModel, repeat: int,
                say: Callable[[str], None]) -> dict:
    server = SimServer(model).start()
    try:
        runners = {t.name: Runner(t, server) for t in tasks}
        # warm-up (imports, HTTP clients, LangGraph's graph, the DSL parser): one unmeasured run each
        first = runners[tasks[0].name]
        for a in approaches:
            s = await first.run(a)
            if s.error:
                say(f"warm-up {a} on {tasks[0].name}: {s.error}")
        samples: dict[str, dict[str, list[Sample]]] = {t.name: {a: [] for a in approaches} for t in tasks}
        for r in range(repeat):
            order = approaches[r % len(approaches):] + approaches[:r % len(approaches)]   # rotate: no fixed slot
            for t in tasks:
                for a in order:
                    s = await runners[t.name].run(a)
                    samples[t.name][a].append(s)
                    if s.error:
                        say(f"  {t.name} / {a}: FAILED: {s.error}")
            say(f"repeat {r + 1}/{repeat} done ({time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.2f})")
    finally:
        server.stop()
    # tasks: {task: {approach: figures}} only (as issue 30 item 4 says); each task's call count apart
    out: dict[str, Any] = {"tasks": {}, "model": model.to_json(), "repeat": repeat,
                           "calls": {t.name: t.size for t in tasks}}
    for t in tasks:
        entry: dict[str, Any] = {}
        for a in approaches:
            ss = [s for s in samples[t.name][a] if s.error is None]
            if not ss:
                entry[a] = {"error": samples[t.name][a][0].error if samples[t.name][a] else "not run"}
                continue
            e = {"latency_s": round(median([s.latency_s for s in ss]), 4),
                 "llm_requests": int(median([s.llm_requests for s in ss])),
                 "input_tokens": int(median([s.input_tokens for s in ss])),
                 "output_tokens": int(median([s.output_tokens for s in ss]))}
            if a in ("sophon_stream", "sophon_written"):
                limits = [s.stream_limit_s for s in ss if s.stream_limit_s is not None]
                if limits:
                    e["stream_limit_s"] = round(median(limits), 4)
                    # the ratio per run (a run and its own limit), then the median
                    e["vs_stream_limit"] = round(median([s.latency_s / s.stream_limit_s for s in ss
                                                         if s.stream_limit_s]), 4)
            entry[a] = e
        out["tasks"][t.name] = entry
    return out


# ---------------------------------------------------------------------------
# Report


def verdicts(res: dict) -> list[tuple[str, bool, str]]:
    """Issue 30 item 5's targets, on this run's figures."""
    out = []
    for name, e in res["tasks"].items():
        s = e.get("sophon_stream", {})
        if "latency_s" not in s:
            continue
        if "vs_stream_limit" in s:
            out.append((f"{name}: sophon_stream within 3% of its stream limit", s["vs_stream_limit"] <= 1.03,
                        f"{s['latency_s']:.2f} s / {s['stream_limit_s']:.2f} s = {s['vs_stream_limit']:.3f}"))

        def speed(other: str) -> float | None:
            o = e.get(other, {})
            return o["latency_s"] / s["latency_s"] if "latency_s" in o else None

        want = {"parallel_qa": ("react", 3.0), "movie_rec": ("react", 5.0)}
        if name in want:
            other, k = want[name]
            v = speed(other)
            if v is not None:
                out.append((f"{name}: >= {k}x faster than {other}", v >= k, f"{v:.2f}x"))
        if res["calls"][name] >= 4:
            v = speed("parallel_fc")
            if v is not None:
                out.append((f"{name}: >= 1.6x faster than parallel_fc", v >= 1.6, f"{v:.2f}x"))
        if name in ("movie_rec", "map20", "mixed"):
            v = speed("plan_execute")
            if v is not None:
                out.append((f"{name}: >= 1.3x faster than plan_execute", v >= 1.3, f"{v:.2f}x"))
        if res["calls"][name] >= 8 and "input_tokens" in e.get("react", {}):
            ours = s["input_tokens"] + s["output_tokens"]
            theirs = e["react"]["input_tokens"] + e["react"]["output_tokens"]
            out.append((f"{name}: tokens <= 0.2x react", ours <= 0.2 * theirs, f"{ours / theirs:.3f}x"))
    return out


def table(res: dict, approaches: list[str]) -> str:
    lines = [f"{'task':12s} {'calls':>5s} " + " ".join(f"{a:>14s}" for a in approaches)
             + "   stream limit  vs limit"]
    for name, e in res["tasks"].items():
        cells = []
        for a in approaches:
            x = e.get(a, {})
            cells.append(f"{x['latency_s']:13.2f}s" if "latency_s" in x else f"{'FAILED':>14s}")
        s = e.get("sophon_stream", {})
        lim = f"{s['stream_limit_s']:12.2f}s  {s['vs_stream_limit']:8.3f}" if "stream_limit_s" in s else ""
        lines.append(f"{name:12s} {res['calls'][name]:5d} " + " ".join(cells) + "   " + lim)
    lines.append("")
    lines.append(f"{'task':12s} " + " ".join(f"{a:>22s}" for a in approaches) + "   (requests / input / output tokens)")
    for name, e in res["tasks"].items():
        cells = []
        for a in approaches:
            x = e.get(a, {})
            cells.append(f"{x['llm_requests']:>4d} {x['input_tokens']:>8d} {x['output_tokens']:>7d}"
                         if "latency_s" in x else f"{'-':>22s}")
        lines.append(f"{name:12s} " + " ".join(f"{c:>22s}" for c in cells))
    lines.append("")
    lines.append("speed-up of sophon_stream (their latency / ours):")
    for name, e in res["tasks"].items():
        s = e.get("sophon_stream", {})
        if "latency_s" not in s:
            continue
        parts = [f"{a} {e[a]['latency_s'] / s['latency_s']:.2f}x" for a in approaches
                 if a != "sophon_stream" and "latency_s" in e.get(a, {})]
        lines.append(f"  {name:12s} " + ", ".join(parts))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=Path, default=Path(__file__).with_name("agent_tasks.yaml"))
    ap.add_argument("--only", default=None, help="comma-separated task names")
    ap.add_argument("--approaches", default=",".join(APPROACHES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ttft", type=float, default=0.4)
    ap.add_argument("--prompt-tps", type=float, default=5000.0)
    ap.add_argument("--output-tps", type=float, default=60.0)
    ap.add_argument("--chunk-tokens", type=int, default=1)
    ap.add_argument("--json", dest="json_out", type=Path, default=None, metavar="OUT")
    args = ap.parse_args(argv)
    for name in ("ttft", "prompt_tps", "output_tps"):
        if not getattr(args, name) > 0 and not (name == "ttft" and args.ttft == 0):
            ap.error(f"--{name.replace('_', '-')} must be positive")
    if args.repeat < 1 or args.chunk_tokens < 1:
        ap.error("--repeat and --chunk-tokens must be at least 1")
    approaches = [a for a in args.approaches.split(",") if a]
    bad = [a for a in approaches if a not in APPROACHES + EXTRA_APPROACHES]
    if bad:
        ap.error(f"unknown approach(es) {bad}; choose from {', '.join(APPROACHES + EXTRA_APPROACHES)}")
    if any(a in ("react", "parallel_fc") for a in approaches):
        try:
            import langchain_openai  # noqa: F401
            import langgraph  # noqa: F401
        except ImportError:
            print("langgraph / langchain-openai not installed (pip install -e '.[bench]'): "
                  "react and parallel_fc skipped", file=sys.stderr)
            approaches = [a for a in approaches if a not in ("react", "parallel_fc")]
    tasks = load_tasks(args.tasks)
    if args.only:
        keep = set(args.only.split(","))
        tasks = [t for t in tasks if t.name in keep]
    model = LatencyModel(args.ttft, args.prompt_tps, args.output_tps, args.chunk_tokens)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    say(f"load average {os.getloadavg()[0]:.2f}; {len(tasks)} task(s) x {len(approaches)} approach(es) "
        f"x {args.repeat} repeat(s)")
    res = asyncio.run(bench(tasks, approaches, model, args.repeat, say))
    res["load_average"] = round(os.getloadavg()[0], 2)
    print(table(res, approaches))
    checks = verdicts(res)
    for name, e in res["tasks"].items():   # issue 30 item 6: the default order within 2% of written order
        s, w = e.get("sophon_stream", {}), e.get("sophon_written", {})
        if "latency_s" in s and "latency_s" in w:
            r = s["latency_s"] / w["latency_s"]
            checks.append((f"{name}: default order within 2% of written order", r <= 1.02, f"{r:.3f}"))
    if checks:
        print("\ntargets (issue 30 items 5, 6):")
        for what, ok, fig in checks:
            print(f"  [{'met' if ok else 'NOT MET'}] {what}: {fig}")
    res["targets"] = [{"target": w, "met": ok, "figure": f} for w, ok, f in checks]
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
