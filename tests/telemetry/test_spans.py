"""OpenTelemetry spans of runs (issue 29 items 1-4), recorded by the SDK's in-memory exporter."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from pathlib import Path


import sophon_dsl
from sophon_dsl import current_call, telemetry, tool
from sophon_dsl.runtime import RunError

from .conftest import by_name

ROOT = Path(__file__).resolve().parents[2]


def _tools(seen: dict):
    state = {"flaky": 0}

    @tool
    def fetch(url: str) -> str:
        cur = current_call()
        seen.setdefault("traceparents", {})[cur.call_id] = cur.traceparent
        return "x" + url

    @tool
    def flaky(x: str) -> str:
        state["flaky"] += 1
        if state["flaky"] < 2:
            raise RunError("Net.Down", "boom")
        return x

    @tool
    def broken(x: str) -> str:
        raise RunError("Api.Refused", "no <way>")

    return [fetch, flaky, broken]


PLAN = '''goal = "trace me"
†state.a = fetch(url="u")
@retry(3) †state.b = flaky(x=†state.a)
†state.c = map(†input.xs, as=it) {
    †local.r = fetch(url=†it)
}
†state.d = broken(x="1")
†state.e = fetch(url=†state.d)
'''


def test_a_run_is_a_root_span_with_a_child_per_call_attempt(spans):
    seen: dict = {}
    r = sophon_dsl.run(PLAN, tools=_tools(seen), input={"xs": ["a", "b"]})
    assert r.status == "failed"
    (root,) = by_name(spans, "sophon.run")
    assert root.parent is None
    a = root.attributes
    assert a["sophon.run.id"] == r.run_id and a["sophon.goal"] == "trace me"
    assert a["sophon.run.status"] == "failed" and a["sophon.calls.total"] == 5
    assert a["sophon.calls.succeeded"] == 5 and a["sophon.calls.failed"] == 1 and a["sophon.calls.skipped"] == 1
    assert root.status.status_code.name == "ERROR"
    calls = by_name(spans, "sophon.call")
    trace_ids = {s.context.trace_id for s in calls} | {root.context.trace_id}
    assert len(trace_ids) == 1
    by_id: dict = {}
    for s in calls:
        by_id.setdefault(s.attributes["sophon.call.id"], []).append(s)
    # one span per attempt: the retried call has two, the first one failed
    first, second = sorted(by_id["c2"], key=lambda s: s.attributes["sophon.call.attempt"])
    assert first.attributes["sophon.call.status"] == "retrying" and first.attributes["sophon.error.code"] == "Net.Down"
    assert [e.name for e in first.events][-1] == "plan_step_retry"
    assert second.attributes["sophon.call.attempt"] == 2 and second.attributes["sophon.call.status"] == "succeeded"
    # map items are children of the map call's span, with their index
    (m,) = by_id["c3"]
    assert m.parent.span_id == root.context.span_id and "map_start" in [e.name for e in m.events]
    for k in (0, 1):
        (item,) = by_id[f"c3[{k}].fetch"]
        assert item.parent.span_id == m.context.span_id and item.attributes["sophon.map.item"] == k
    (bad,) = by_id["c4"]
    assert bad.status.status_code.name == "ERROR"
    assert bad.attributes["sophon.error.code"] == "Api.Refused" and bad.attributes["sophon.error.cause"] == "no <way>"
    (skipped,) = by_id["c5"]
    assert skipped.attributes["sophon.call.status"] == "skipped"
    assert "plan_step_skipped" in [e.name for e in skipped.events]
    assert by_id["c1"][0].attributes["sophon.call.risk"] == "none"
    assert by_id["c1"][0].name == "sophon.call fetch"
    # the tool saw its own span's context in current_call().traceparent
    tp = seen["traceparents"]["c1"]
    c1 = by_id["c1"][0].context
    assert tp == f"00-{c1.trace_id:032x}-{c1.span_id:016x}-{int(c1.trace_flags):02x}"
    assert telemetry.traceparent(r.run_id, "c1") is None  # forgotten once the call ended


def test_no_tracing_without_a_provider():
    assert not telemetry.active() or telemetry._override is not None
    assert telemetry.run_subscriber(None) is None or telemetry._override is not None
    # a fresh interpreter that runs a plan imports no OpenTelemetry at all
    code = ("import sys, sophon_dsl\n"
            "r = sophon_dsl.run('†state.a = echo(text=\"x\")',"
            " tools=[sophon_dsl.tool(lambda text: text, name='echo')])\n"
            "assert r.status == 'succeeded', r.error\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_resumed_durable_run_continues_the_same_trace(spans, tmp_path):
    from sophon_dsl.model import Risk

    @tool(risk=Risk.HIGH)
    def send(to: str) -> str:
        return "sent " + to

    store = f"sqlite:///{tmp_path / 'runs.db'}"
    r = sophon_dsl.run('†state.s = send(to="bob")', tools=[send], store=store, approve="wait")
    assert r.status == "waiting"
    (first,) = by_name(spans, "sophon.run")
    assert first.attributes["sophon.run.status"] == "waiting"
    spans.clear()
    r2 = sophon_dsl.resume(r.run_id, store=store, tools=[send], approve=True)
    assert r2.status == "succeeded"
    (second,) = by_name(spans, "sophon.run")
    assert second.context.trace_id == first.context.trace_id
    assert second.parent is not None and second.parent.span_id == first.context.span_id
    (call,) = by_name(spans, "sophon.call")
    assert call.context.trace_id == first.context.trace_id and call.attributes["sophon.call.risk"] == "high"


def test_an_agent_run_has_turn_spans_and_genai_request_spans(spans):
    from sophon_dsl import Agent
    from sophon_dsl.llm.providers.scripted import ScriptedProvider

    @tool
    def lookup(q: str) -> str:
        return "found " + q

    provider = ScriptedProvider(['†state.a = lookup(q="x")\nreturn †state.a'])
    result = Agent(provider, tools=[lookup], stdlib=False).run("find x")
    assert result.status == "succeeded", result
    (root,) = by_name(spans, "sophon.run")
    assert root.attributes["sophon.run.kind"] == "agent" and root.attributes["sophon.goal"] == "find x"
    (turn,) = by_name(spans, "sophon.turn")
    assert turn.parent.span_id == root.context.span_id and turn.attributes["sophon.turn"] == 1
    (call,) = by_name(spans, "sophon.call")
    assert call.parent.span_id == turn.context.span_id and call.attributes["sophon.tool"] == "lookup"
    (llm,) = [s for s in spans.get_finished_spans() if "gen_ai.operation.name" in s.attributes]
    assert llm.parent.span_id == turn.context.span_id and llm.kind.name == "CLIENT"
    assert llm.attributes["gen_ai.operation.name"] == "chat" and llm.attributes["gen_ai.system"] == "scripted"
    assert llm.attributes["gen_ai.usage.output_tokens"] > 0 and llm.attributes["gen_ai.usage.input_tokens"] > 0


class _Echo(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def do_GET(self):
        _Echo.seen.append(self.headers.get("traceparent"))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_the_http_tools_send_the_calls_traceparent(spans):
    from sophon_dsl.tools import as_registry
    from stdlib_tools.config import StdlibConfig

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x"
        tools = as_registry([], stdlib=StdlibConfig(http_allow_list=("127.0.0.1",)))
        r = sophon_dsl.run(f'†state.r = http.get(url="{url}")', tools=tools, approve=True)
        assert r.status == "succeeded", r.error
    finally:
        server.shutdown()
        server.server_close()
    (call,) = by_name(spans, "sophon.call")
    ctx = call.context
    assert _Echo.seen == [f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"]
