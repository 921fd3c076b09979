"""Issue 17, Low: standard tools fail with their documented dotted codes, never a raw
Python exception; `check` reports malformed tool declarations instead of crashing."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sophon_dsl.cli import main
from sophon_dsl.runtime.errors import RunError
from stdlib_tools import StdlibConfig, all_tools
from stdlib_tools.errors import ToolError

HUGE = 10 ** 5000  # a value JSON cannot carry: only a Python caller can hand it over

CASES = [
    ("text.truncate", {"value": {"a": HUGE}}, "Text."),
    ("text.join", {"items": [HUGE]}, "Text."),
    ("text.template", {"template": "{a}", "values": {"a": HUGE}}, "Text."),
    ("document.create", {"path": "x.csv", "rows": [{"a": HUGE}]}, "Document."),
    ("memory.write", {"text": "x", "metadata": {"a": HUGE}}, "Memory."),
]


@pytest.mark.parametrize("name,args,prefix", CASES, ids=[c[0] for c in CASES])
def test_a_value_a_tool_cannot_handle_is_a_named_error(tmp_path, name, args, prefix):
    config = StdlibConfig(sandbox_root=tmp_path, memory_db_path=":memory:")
    spec = {t.name: t for t in all_tools(config)}[name]
    with pytest.raises(RunError) as info:
        out = spec.func(**args)
        if inspect.isawaitable(out):
            asyncio.run(out)
    assert isinstance(info.value, ToolError) and info.value.code.startswith(prefix), info.value


MALFORMED = [
    {"t": {"input": 5}},
    {"t": {"input": {"properties": 5}}},
    [{"type": "function", "function": {"name": "t", "parameters": {"properties": {"a": 7}}}}],
    [{"name": "t", "input_schema": []}],
    {"t": {"input": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}, "output": {"$ref": "#"}}},
    {"t": {"input": {"type": "object", "required": [1]}}},
    {"t": {"input": {"type": "object", "properties": {"a": {"pattern": "("}}}}},
]


@pytest.mark.parametrize("declaration", MALFORMED, ids=range(len(MALFORMED)))
def test_check_reports_malformed_declarations_without_a_traceback(tmp_path, capsys, declaration):
    (tmp_path / "d.json").write_text(json.dumps(declaration), encoding="utf-8")
    (tmp_path / "p.plan").write_text('†state.x = t(a="(")\n†state.y = t(a=†state.x)\n', encoding="utf-8")
    capsys.readouterr()
    code = main(["check", str(tmp_path / "p.plan"), "--tools", str(tmp_path / "d.json")])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert code in (0, 1, 2)


# --- issue 24, item 13: the last raw errors, through `sophon-dsl run` -------------------------

class _Redirects(BaseHTTPRequestHandler):
    """Answers /N with a redirect to LOCATIONS[N] (malformed Location headers)."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", LOCATIONS[int(self.path.strip("/"))])
        self.send_header("Content-Length", "0")
        self.end_headers()


LOCATIONS = ["http:\\\\host/x", "http://[::1", "http:\\\\127.0.0.1/x"]


@pytest.fixture
def redirecting_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Redirects)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def _run(tmp_path, capsys, plan: str, *flags: str) -> dict:
    (tmp_path / "p.plan").write_text(plan, encoding="utf-8")
    capsys.readouterr()
    code = main(["run", str(tmp_path / "p.plan"), "--no-store", "--approve", "yes", "--json",
                 "--sandbox", str(tmp_path), *flags])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    return json.loads(out)["state"]["state"]


@pytest.mark.parametrize("follow", [True, False])
def test_a_malformed_redirect_is_http_invalid_redirect(tmp_path, capsys, redirecting_server, follow):
    base = f"http://127.0.0.1:{redirecting_server}"
    plan = "".join(f'†state.ok{i} || †state.err{i} = http.request(method="GET", url="{base}/{i}", '
                   f'follow_redirects={"true" if follow else "false"})\n' for i in range(len(LOCATIONS)))
    state = _run(tmp_path, capsys, plan, "--allow-host", "127.0.0.1")
    for i in range(len(LOCATIONS)):
        assert state[f"err{i}"]["error"] == "Http.InvalidRedirect", state
        assert f"{base}/{i}" in state[f"err{i}"]["cause"]


def test_http_get_through_a_malformed_redirect(tmp_path, capsys, redirecting_server):
    url = f"http://127.0.0.1:{redirecting_server}/0"
    state = _run(tmp_path, capsys, f'†state.ok || †state.err = http.get(url="{url}")\n',
                 "--allow-host", "127.0.0.1")
    assert state["err"]["error"] == "Http.InvalidRedirect"


def test_files_read_of_an_unknown_users_home_is_files_invalid_path(tmp_path, capsys):
    state = _run(tmp_path, capsys, '†state.ok || †state.err = files.read(path="~nosuchuser/x")\n'
                                   '†state.ok2 || †state.err2 = files.list(path="~nosuchuser")\n')
    for key in ("err", "err2"):
        assert state[key]["error"] == "Files.InvalidPath"
        assert "~nosuchuser" in state[key]["cause"]


@pytest.mark.parametrize("expression,code", [
    ("(-8)**0.5", "Math.DomainError"),
    ("(-1) ** (1/3)", "Math.DomainError"),
    ("x ** 0.5", "Math.DomainError"),
    ("0 ** -1", "Math.DivisionByZero"),
    ("0.0 ** -2", "Math.DivisionByZero"),
])
def test_math_eval_without_a_real_result_is_a_named_error(tmp_path, capsys, expression, code):
    state = _run(tmp_path, capsys, f'†state.ok || †state.err = math.eval(expression="{expression}", '
                                   'variables={"x": -2})\n')
    assert state["err"]["error"] == code, state
