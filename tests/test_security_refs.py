"""Issue 17, High 1: no JSON Schema `$ref` is ever fetched over the network.

A local HTTP server counts the requests; every place that validates with jsonschema
(data.validate, a plan's input / output / state schemas, tool declarations in `check`,
tool inputs at run time) is given a schema whose `$ref` points at it.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import sophon_dsl
from sophon_dsl.cli import main


class _Counter(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        body = json.dumps({"enum": ["secret-token-42"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def schema_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    server.hits = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}/s.json"
    finally:
        server.shutdown()
        server.server_close()


def _run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_data_validate_never_fetches_a_remote_ref(schema_server, tmp_path, capsys):
    server, url = schema_server
    plan = tmp_path / "p.plan"
    plan.write_text(f'†state.v = data.validate(value="x", schema={{"$ref": "{url}"}})\n', encoding="utf-8")
    code, out, _ = _run_cli(capsys, "run", str(plan), "--json")
    assert server.hits == []
    assert "secret-token-42" not in out
    call = json.loads(out)["calls"][0]
    assert code == 1 and call["error"]["error"] == "Data.InvalidSchema"
    assert "never fetched" in call["error"]["cause"]


def test_data_validate_still_resolves_local_and_metaschema_refs(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text('†state.v = data.validate(value=3, schema={"$defs": {"s": {"type": "string"}}, '
                    '"$ref": "#/$defs/s"})\n'
                    '†state.m = data.validate(value={"type": "string"}, '
                    'schema={"$ref": "https://json-schema.org/draft/2020-12/schema"})\n',
                    encoding="utf-8")
    code, out, _ = _run_cli(capsys, "run", str(plan), "--json")
    state = json.loads(out)["state"]["state"]
    assert code == 0
    assert state["v"]["valid"] is False and state["m"]["valid"] is True


def test_plan_input_schema_ref_is_not_fetched_during_run(schema_server):
    server, url = schema_server
    plan = ('input = {"type": "object", "properties": {"k": {"$ref": "' + url + '"}}}\n'
            '†state.x = text.join(items=["a"], separator="")\n')
    with pytest.raises(sophon_dsl.SophonError) as info:
        sophon_dsl.run(plan, input={"k": "anything"})
    assert server.hits == []
    assert "never fetched" in str(info.value)


def test_plan_output_and_state_schema_refs_are_not_fetched(schema_server):
    server, url = schema_server
    plan = ('output = {"$ref": "' + url + '"}\n'
            'state = {"type": "object", "properties": {"x": {"$ref": "' + url + '"}}}\n'
            '†state.x = text.join(items=["a"], separator="")\n'
            'return †state.x\n')
    result = sophon_dsl.run(plan)
    assert server.hits == []
    assert result.status != "succeeded"


def test_check_never_fetches_a_tool_declaration_ref(schema_server, tmp_path, capsys):
    server, url = schema_server
    plan = tmp_path / "p.plan"
    plan.write_text('tool probe = {"description": "d", "input": {"type": "object", "properties": '
                    '{"k": {"$ref": "' + url + '"}}}, "risk": "none"}\n'
                    'probe(k="value")\n', encoding="utf-8")
    code, out, err = _run_cli(capsys, "check", str(plan), "--json")
    assert server.hits == []
    assert code == 0, out + err


def test_tool_input_ref_is_not_fetched_at_run_time(schema_server):
    server, url = schema_server

    @sophon_dsl.tool(name="probe", input_schema={"type": "object", "properties": {"k": {"$ref": url}}})
    def probe(k: Any) -> str:
        return "ran"

    result = sophon_dsl.run('†state.x = probe(k=†input.k)\n', [probe], input={"k": "v"})
    assert server.hits == []
    assert result.status == "failed"
