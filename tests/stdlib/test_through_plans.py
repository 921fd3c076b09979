"""Every standard tool, through a plan: `sophon-dsl run PLAN --json` (issue 4's proof).

Each test writes a plan into ``tmp_path`` and runs it with ``sophon_dsl.cli.main``, then
reads the RunResult JSON: exit code, state values, call statuses, and the error names of
refusals.  Everything is offline: HTTP goes to a ``http.server`` on 127.0.0.1, email to an
aiosmtpd server on 127.0.0.1.  The example plans of ``examples/stdlib`` are checked and run
here too.

`test_every_standard_tool_runs_through_a_plan` fails when a tool has no plan test here.
"""

from __future__ import annotations

import ast
import json
import sys
import threading
from email import message_from_bytes
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sophon_dsl.cli import main
from stdlib_tools import StdlibConfig, all_tools

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "stdlib"
EXAMPLE_NAMES = ("http", "files", "data", "text", "math", "time", "memory", "documents", "email",
                 "shell")
ALL_TOOLS = sorted(t.name for t in all_tools(StdlibConfig(enable_shell=True)))


# --- helpers -----------------------------------------------------------------------------------

class Run:
    """What one `sophon-dsl run --json` printed and returned."""

    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err
        self.result: dict[str, Any] | None = json.loads(out) if out.strip() else None

    @property
    def status(self) -> str:
        assert self.result is not None, self.err
        return self.result["status"]

    @property
    def state(self) -> dict[str, Any]:
        assert self.result is not None, self.err
        return self.result["state"].get("state", {})

    def call(self, cid: str) -> dict[str, Any]:
        assert self.result is not None, self.err
        return next(c for c in self.result["calls"] if c["id"] == cid)

    def statuses(self) -> dict[str, str]:
        assert self.result is not None, self.err
        return {c["id"]: c["status"] for c in self.result["calls"]}

    def error_of(self, cid: str) -> str | None:
        error = self.call(cid)["error"]
        return error["error"] if error else None


@pytest.fixture
def run_plan(tmp_path, capsys):
    """``run_plan(text, *flags)``: write the plan into tmp_path and `sophon-dsl run` it."""
    counter = iter(range(1000))

    def _run(text: str | Path, *flags: str) -> Run:
        if isinstance(text, Path):
            plan = text
        else:
            plan = tmp_path / f"plan{next(counter)}.plan"
            plan.write_text(text, encoding="utf-8")
        capsys.readouterr()
        code = main(["run", str(plan), "--json", *flags])
        out, err = capsys.readouterr()
        return Run(code, out, err)

    return _run


@pytest.fixture
def settings(tmp_path):
    """``settings(**fields)``: a --stdlib-config YAML file holding these StdlibConfig fields."""
    import yaml

    counter = iter(range(1000))

    def _write(**fields: Any) -> str:
        path = tmp_path / f"stdlib{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(fields), encoding="utf-8")
        return str(path)

    return _write


# --- a local HTTP service ----------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # keep the test output clean
        pass

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if not isinstance(body, bytes)
                         else "text/plain; charset=utf-8")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        from urllib.parse import parse_qs, urlsplit

        self.server.seen.append(("GET", self.path, b""))  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/prices.json":
            self._send(200, {"count": 2, "currency": query.get("currency"),
                             "items": [{"name": "Acme", "price": 10}, {"name": "Globex", "price": 12}]})
        elif url.path == "/hello":
            self._send(200, b"hello from 127.0.0.1")
        elif url.path == "/to-private":
            self._send(302, b"", {"Location": "http://10.0.0.1/secret"})
        elif url.path == "/big":
            self._send(200, b"x" * 5000)
        elif url.path == "/loop":
            self._send(302, b"", {"Location": "/loop"})
        elif url.path == "/hop":
            self._send(302, b"", {"Location": "/prices.json?currency=USD"})
        else:
            self._send(404, {"error": "not found"})

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_POST(self) -> None:
        body = self._body()
        self.server.seen.append(("POST", self.path, body))  # type: ignore[attr-defined]
        self._send(201, {"received": json.loads(body or b"null"), "path": self.path})

    def do_PUT(self) -> None:
        body = self._body()
        self.server.seen.append(("PUT", self.path, body))  # type: ignore[attr-defined]
        self._send(200, {"method": "PUT", "text": body.decode()})


@pytest.fixture(scope="module")
def _http_service():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def http_server(_http_service):
    """(server, base URL) of a local HTTP service; ``server.seen`` lists this test's requests."""
    _http_service.seen.clear()
    return _http_service, f"http://127.0.0.1:{_http_service.server_address[1]}"


# --- a local SMTP server -----------------------------------------------------------------------




@pytest.fixture
def smtp_settings(smtp_server, settings):
    sink, port = smtp_server
    return sink, settings(smtp_host="127.0.0.1", smtp_port=port, smtp_sender="Agent <agent@example.com>",
                          smtp_timeout=5)


# --- coverage: every standard tool has a plan test here, and an example plan --------------------

def _plans_in_this_file() -> list[str]:
    """The plan texts written in this module (string constants that parse to plans with calls)."""
    from sophon_dsl.loader import parse

    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    plans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "(" in node.value:
            text = node.value.replace("{base}", "http://127.0.0.1:1").replace("{secret}", "/x")
            result = parse(text)
            if result.ok and result.plan.calls:
                plans.append(text)
    return plans


def _tools_of(text: str) -> set[str]:
    from sophon_dsl.loader import parse

    return {c.tool for c in parse(text).plan.calls}


def test_every_standard_tool_runs_through_a_plan():
    covered: set[str] = set()
    for text in _plans_in_this_file():
        covered |= _tools_of(text)
    missing = [name for name in ALL_TOOLS if name not in covered]
    assert not missing, f"standard tools without a through-plan test in {Path(__file__).name}: {missing}"


def test_every_standard_tool_has_an_example_plan():
    covered: set[str] = set()
    for name in EXAMPLE_NAMES:
        covered |= _tools_of((EXAMPLES / f"{name}.plan").read_text(encoding="utf-8"))
    assert sorted(p.stem for p in EXAMPLES.glob("*.plan")) == sorted(EXAMPLE_NAMES)
    assert [name for name in ALL_TOOLS if name not in covered] == []


def test_example_plans_pass_check(settings, capsys):
    plans = sorted(str(p) for p in EXAMPLES.glob("*.plan"))
    assert len(plans) == len(EXAMPLE_NAMES)
    assert main(["check", *plans, "--stdlib-config", settings(enable_shell=True)]) == 0
    # without enable_shell only the shell example fails, on E201 (unknown tool)
    others = [p for p in plans if not p.endswith("shell.plan")]
    assert main(["check", *others]) == 0
    capsys.readouterr()
    assert main(["check", str(EXAMPLES / "shell.plan"), "--json"]) == 1
    assert [d["code"] for d in json.loads(capsys.readouterr().out)] == ["E201"]


def test_example_plans_are_mentioned_in_the_docs():
    text = (ROOT / "docs" / "stdlib.md").read_text(encoding="utf-8")
    for name in EXAMPLE_NAMES:
        assert f"examples/stdlib/{name}.plan" in text, name


# --- HTTP --------------------------------------------------------------------------------------

HTTP_PLAN = """
†state.prices = http.get(url="{base}/prices.json", params={"currency": "EUR"}, timeout=5)
†state.hello = http.get(url="{base}/hello")
†state.posted = http.request(method="POST", url="{base}/summary", json={"vendors": †state.prices.json.count})
†state.put = http.request(method="PUT", url="{base}/raw", body="plain text", headers={"X-Test": "1"})
†state.hop = http.get(url="{base}/hop")
"""


def test_http_get_and_request_with_allow_host(run_plan, http_server):
    server, base = http_server
    run = run_plan(HTTP_PLAN.replace("{base}", base), "--allow-host", "127.0.0.1", "--approve", "yes")
    assert run.code == 0, run.err
    assert run.status == "succeeded"
    assert set(run.statuses().values()) == {"succeeded"}
    s = run.state
    assert s["prices"]["status"] == 200
    assert s["prices"]["json"] == {"count": 2, "currency": "EUR",
                                   "items": [{"name": "Acme", "price": 10}, {"name": "Globex", "price": 12}]}
    assert s["hello"]["text"] == "hello from 127.0.0.1" and s["hello"]["json"] is None
    assert s["posted"]["status"] == 201
    assert s["posted"]["json"] == {"received": {"vendors": 2}, "path": "/summary"}
    assert s["put"]["json"] == {"method": "PUT", "text": "plain text"}
    assert s["hop"]["json"]["currency"] == "USD" and len(s["hop"]["redirects"]) == 1
    posted = [json.loads(body) for method, path, body in server.seen if method == "POST"]
    assert posted == [{"vendors": 2}]
    assert ("PUT", "/raw", b"plain text") in server.seen


def test_http_request_is_medium_risk_and_needs_approval(run_plan, http_server):
    server, base = http_server
    run = run_plan(f'†state.posted = http.request(method="POST", url="{base}/summary", json={{"a": 1}})\n',
                   "--allow-host", "127.0.0.1", "--approve", "no")
    assert run.code == 1
    assert run.status == "rejected" and run.statuses() == {"c1": "pending"}
    assert server.seen == []
    # http.get is low risk: no approval needed
    run = run_plan(f'†state.page = http.get(url="{base}/hello")\n', "--allow-host", "127.0.0.1",
                   "--approve", "no")
    assert run.code == 0 and run.state["page"]["status"] == 200


@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "0x7f.0.0.1", "127.1", "[::ffff:127.0.0.1]",
                                  "localhost"])
def test_http_ssrf_guard_refuses_loopback_without_allow_host(run_plan, http_server, host):
    server, base = http_server
    port = server.server_address[1]
    run = run_plan(f'†state.page = http.get(url="http://{host}:{port}/hello")\n')
    assert run.code == 1
    assert run.status == "failed" and run.statuses() == {"c1": "failed"}
    assert run.error_of("c1") == "Http.Blocked"
    assert "page" not in run.state
    assert server.seen == []  # refused before any request was sent


def test_http_ssrf_guard_refuses_private_redirect_even_with_allow_host(run_plan, http_server):
    server, base = http_server
    run = run_plan(f'†state.page = http.get(url="{base}/to-private")\n', "--allow-host", "127.0.0.1")
    assert run.code == 1 and run.error_of("c1") == "Http.Blocked"
    assert [p for _, p, _ in server.seen] == ["/to-private"]


def test_http_error_caught_by_a_branching_output_path(run_plan, http_server):
    _, base = http_server
    run = run_plan(f'†state.page || †state.problem = http.get(url="{base}/hello")\n'
                   '†state.after = text.join(items=["got", "here"], separator=" ")\n')
    assert run.code == 0 and run.status == "succeeded"
    assert "page" not in run.state
    assert run.state["problem"]["error"] == "Http.Blocked" and run.state["problem"]["cause"]
    assert run.call("c1")["status"] == "failed" and run.error_of("c1") == "Http.Blocked"
    assert run.state["after"] == "got here"


def test_http_limits_from_stdlib_config(run_plan, http_server, settings):
    server, base = http_server
    cfg = settings(http_allow_list=["127.0.0.1"], http_max_response_bytes=1000, http_max_redirects=3)
    run = run_plan(f'big: †state.big = http.get(url="{base}/big")\n'
                   f'loop: †state.loop = http.get(url="{base}/loop")\n'
                   f'bad: †state.bad = http.get(url="ftp://127.0.0.1/x")\n', "--stdlib-config", cfg)
    assert run.code == 1 and run.status == "failed"
    assert run.call("big")["status"] == "succeeded"
    assert run.state["big"]["truncated"] is True and len(run.state["big"]["text"]) == 1000
    assert run.error_of("loop") == "Http.TooManyRedirects"
    assert run.error_of("bad") in ("Http.Blocked", "Http.InvalidUrl")
    assert [p for _, p, _ in server.seen].count("/loop") == 4  # the first request and 3 redirects


def test_http_allow_list_given_as_one_string_in_stdlib_config(run_plan, http_server, settings):
    server, base = http_server
    port = server.server_address[1]
    cfg = settings(http_allow_list="127.0.0.1")
    run = run_plan(f'†state.page = http.get(url="http://0:{port}/hello")\n', "--stdlib-config", cfg)
    assert server.seen == []  # the guard must not let "0" through
    assert run.code == 2 or run.error_of("c1") == "Http.Blocked"
    run = run_plan(f'†state.page = http.get(url="{base}/hello")\n', "--stdlib-config", cfg)
    # either a usage error, or the one host it names is allowed
    assert run.code == 2 or (run.code == 0 and run.state["page"]["status"] == 200)


def test_http_example_plan(run_plan, http_server):
    server, base = http_server
    run = run_plan(EXAMPLES / "http.plan", "--allow-host", "127.0.0.1", "--approve", "yes",
                   "--input", json.dumps({"base_url": base}))
    assert run.code == 0, run.err
    assert run.state["prices"]["json"]["currency"] == "EUR"
    assert run.state["posted"]["json"]["received"] == {"vendors": 2}


# --- files -------------------------------------------------------------------------------------

def test_files_write_list_read_in_the_sandbox(run_plan, sandbox):
    (sandbox / "notes").mkdir()
    (sandbox / "notes" / "old.txt").write_text("old", encoding="utf-8")
    run = run_plan(EXAMPLES / "files.plan", "--sandbox", str(sandbox), "--approve", "yes")
    assert run.code == 0, run.err
    assert run.statuses() == {"w": "succeeded", "c2": "succeeded", "c3": "succeeded"}
    s = run.state
    assert s["written"]["path"] == "notes/today.txt" and s["written"]["bytes_written"] == 23
    assert s["note"]["content"] == "Call Acme about pricing" and s["note"]["truncated"] is False
    assert sorted(e["name"] for e in s["listing"]["entries"]) == ["old.txt", "today.txt"]
    assert (sandbox / "notes" / "today.txt").read_text(encoding="utf-8") == "Call Acme about pricing"


FILES_WRITE = '†state.written = files.write(path="out.txt", content="data")\n'


def test_files_write_without_approval_is_rejected(run_plan, sandbox):
    for flags in (["--approve", "no"], []):  # no --approve and no terminal: rejected too
        run = run_plan(FILES_WRITE, "--sandbox", str(sandbox), *flags)
        assert run.code == 1
        assert run.status == "rejected" and run.statuses() == {"c1": "pending"}
        assert not (sandbox / "out.txt").exists()


FILES_ESCAPES = """
r1: †state.a = files.read(path="../secret.txt")
r2: †state.b = files.read(path="{secret}")
r3: †state.c = files.read(path="link.txt")
l1: †state.d = files.list(path="..")
l2: †state.e = files.list(path="linkdir")
w1: †state.f = files.write(path="../evil.txt", content="x")
w2: †state.g = files.write(path="linkdir/evil.txt", content="x")
nf: †state.h = files.read(path="missing.txt")
"""


def test_files_modes_and_caps_through_a_plan(run_plan, sandbox):
    (sandbox / "log.txt").write_text("one\n", encoding="utf-8")
    run = run_plan('a: †state.a = files.write(path="log.txt", content="two\\n", mode="append")\n'
                   'c: †state.c = files.write(path="log.txt", content="x", mode="create")\n'
                   '@after(a)\n'
                   'r: †state.r = files.read(path="log.txt", max_bytes=4)\n'
                   'l: †state.l = files.list(path=".", recursive=true)\n',
                   "--sandbox", str(sandbox), "--approve", "yes")
    assert run.code == 1
    assert run.error_of("c") == "Files.Exists"
    assert run.state["r"] == {"path": "log.txt", "content": "one\n", "size": 8, "truncated": True}
    assert (sandbox / "log.txt").read_text(encoding="utf-8") == "one\ntwo\n"
    assert "log.txt" in [e["path"] for e in run.state["l"]["entries"]]


def test_files_refuse_paths_outside_the_sandbox(run_plan, sandbox, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret", encoding="utf-8")
    (sandbox / "link.txt").symlink_to(secret)
    (sandbox / "linkdir").symlink_to(tmp_path)
    run = run_plan(FILES_ESCAPES.replace("{secret}", str(secret)), "--sandbox", str(sandbox),
                   "--approve", "yes")
    assert run.code == 1 and run.status == "failed"
    for cid in ("r1", "r2", "r3", "l1", "l2", "w1", "w2"):
        assert run.error_of(cid) == "Files.OutsideSandbox", (cid, run.call(cid))
    assert run.error_of("nf") == "Files.NotFound"
    assert run.state == {}
    assert not (tmp_path / "evil.txt").exists()


# --- data --------------------------------------------------------------------------------------

DATA_PLAN = """
input = {"type": "object", "properties": {"catalog": {"type": "object"}}, "required": ["catalog"]}
†state.names = data.query(value=†input.catalog, expression="items[?price < `20`].name")
†state.contact = data.pick(value=†input.catalog.owner, keys=["name", "address.city"])
†state.merged = data.merge(values=[†state.contact, {"address": {"zip": "N1"}, "tags": ["a"]}, {"tags": ["b"]}])
†state.updated = data.set(value=†state.merged, path="tags[1]", new="c")
†state.valid = data.validate(value=†state.updated, schema={"type": "object", "required": ["name", "tags"]})
†state.invalid = data.validate(value=†state.names, schema={"type": "array", "items": {"type": "integer"}})
"""


def test_data_tools_through_a_plan(run_plan):
    catalog = {"items": [{"name": "Acme", "price": 10}, {"name": "Globex", "price": 12},
                         {"name": "Initech", "price": 30}],
               "owner": {"name": "Ada", "age": 36, "address": {"city": "London", "street": "Main"}}}
    run = run_plan(DATA_PLAN, "--input", json.dumps({"catalog": catalog}))
    assert run.code == 0, run.err
    s = run.state
    assert s["names"] == ["Acme", "Globex"]
    assert s["contact"] == {"name": "Ada", "address": {"city": "London"}}
    assert s["merged"] == {"name": "Ada", "address": {"city": "London", "zip": "N1"}, "tags": ["b"]}
    assert s["updated"]["tags"] == ["b", "c"]
    assert s["valid"] == {"valid": True, "errors": []}
    assert s["invalid"]["valid"] is False and len(s["invalid"]["errors"]) == 2


def test_data_refusals_through_a_plan(run_plan):
    run = run_plan('q: †state.a = data.query(value={"a": 1}, expression="items[?")\n'
                   'v: †state.b = data.validate(value=1, schema={"type": "no-such-type"})\n'
                   'p: †state.c = data.pick(value={"a": 1}, keys=["b"], strict=true)\n')
    assert run.code == 1 and run.status == "failed"
    assert run.error_of("q") == "Data.InvalidQuery"
    assert run.error_of("v") == "Data.InvalidSchema"
    assert run.error_of("p") is not None and run.error_of("p").startswith("Data.")


# --- text --------------------------------------------------------------------------------------

TEXT_PLAN = """
input = {"type": "object", "properties": {"name": {"type": "string"}}}
†state.words = text.split(text="Acme, Globex,, Initech", separator=",", drop_empty=true)
†state.line = text.join(items=†state.words, separator=" / ")
†state.found = text.regex_extract(text="Acme: 10 USD, Globex: 12 USD", pattern="(?P<name>\\\\w+): (?P<amount>\\\\d+)")
†state.greeting = text.template(template="Hello {who}, {n} vendors: {line}", values={"who": †input.name, "n": 3, "line": †state.line})
†state.inline = text.join(items=["Dear †input.name", "first is †state.found[0].named.name"], separator="; ")
†state.short = text.truncate(value=["aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccc", "dddddddddddddddddddd"], max_chars=60)
"""  # noqa: E501 (plan text: one DSL statement per line, kept as written)


def test_text_tools_through_a_plan(run_plan):
    run = run_plan(TEXT_PLAN, "--input", '{"name": "Ada"}')
    assert run.code == 0, run.err
    s = run.state
    assert s["words"] == ["Acme", "Globex", "Initech"]
    assert s["line"] == "Acme / Globex / Initech"
    assert [m["named"] for m in s["found"]] == [{"name": "Acme", "amount": "10"},
                                                 {"name": "Globex", "amount": "12"}]
    assert s["greeting"] == "Hello Ada, 3 vendors: Acme / Globex / Initech"
    assert s["inline"] == "Dear Ada; first is Acme"
    assert s["short"]["truncated"] is True and s["short"]["total_items"] == 4
    assert 0 < s["short"]["shown_items"] < 4 and len(s["short"]["text"]) <= 60


def test_text_refusals_through_a_plan(run_plan):
    run = run_plan('t: †state.a = text.template(template="Hi {missing}", values={})\n'
                   'r: †state.b = text.regex_extract(text="x", pattern="(unclosed")\n'
                   'ok: †state.c = text.template(template="Hi {missing}", values={}, strict=false)\n')
    assert run.code == 1 and run.status == "failed"
    assert run.error_of("t") == "Text.MissingValue"
    assert run.error_of("r") == "Text.InvalidRegex"
    assert run.call("ok")["status"] == "succeeded" and run.state["c"] == "Hi {missing}"


# --- math --------------------------------------------------------------------------------------

def test_math_eval_through_a_plan(run_plan):
    run = run_plan(EXAMPLES / "math.plan")
    assert run.code == 0, run.err
    assert run.state["total"] == pytest.approx(34.2)
    assert run.state["over_budget"] is True
    run = run_plan('†state.n = math.eval(expression="max(a, b) ** 2 + sqrt(16)", variables={"a": 3, "b": 5})\n'
                   '†state.c = math.eval(expression="1 < x <= 3 and not flag", variables={"x": 2, "flag": false})\n')
    assert run.code == 0, run.err
    assert run.state == {"n": 29, "c": True}


@pytest.mark.parametrize("expression, code", [
    ("__import__('os').system('true')", "Math.InvalidExpression"),
    ("(1).__class__", "Math.InvalidExpression"),
    ("1 / 0", "Math.DivisionByZero"),
    ("unknown + 1", "Math.UnknownName"),
    ("10 ** 100000", "Math.Overflow"),
])
def test_math_eval_refusals_through_a_plan(run_plan, expression, code):
    run = run_plan(f'†state.n = math.eval(expression={json.dumps(expression)})\n')
    assert run.code == 1 and run.status == "failed"
    assert run.error_of("c1") == code


# --- time --------------------------------------------------------------------------------------

def test_datetime_now_and_time_sleep_through_a_plan(run_plan):
    run = run_plan('t1: †state.started = datetime.now(timezone="UTC")\n'
                   '@after(t1)\n'
                   's: †state.pause = time.sleep(seconds=0.01)\n'
                   '@after(s)\n'
                   't2: †state.local = datetime.now()\n')
    assert run.code == 0, run.err
    s = run.state
    assert s["started"]["timezone"] == "UTC" and s["started"]["utc_offset"] == "+00:00"
    assert set(s["started"]) >= {"iso", "date", "time", "weekday", "unix"}
    assert s["pause"] == {"slept": 0.01}
    assert s["local"]["unix"] >= s["started"]["unix"]


def test_time_refusals_through_a_plan(run_plan):
    run = run_plan('z: †state.a = datetime.now(timezone="Mars/Olympus_Mons")\n'
                   's: †state.b = time.sleep(seconds=3600)\n')
    assert run.code == 1
    assert run.error_of("z") == "Time.UnknownTimezone"
    assert run.error_of("s") == "Time.TooLong"


def test_time_example_plan(run_plan):
    run = run_plan(EXAMPLES / "time.plan")
    assert run.code == 0, run.err
    assert run.state["started"]["timezone"] == "UTC"
    assert run.state["finished"]["timezone"] == "Europe/Paris"


# --- memory ------------------------------------------------------------------------------------

MEMORY_PLAN = """
w1: †state.first = memory.write(text="Acme charges 10 USD per seat", tags=["pricing", "acme"])
@after(w1)
w2: †state.second = memory.write(text="Globex offers a free tier", tags=["pricing"], metadata={"source": "web"})
@after(w1, w2)
s1: †state.acme = memory.search(query="acme seats", limit=3)
@after(w1, w2)
s2: †state.tagged = memory.search(query="", tags=["pricing"], limit=10)
†state.free = memory.search(query="free tier", _after=["w2"])
"""


def test_memory_write_then_search_in_one_plan(run_plan):
    run = run_plan(MEMORY_PLAN, "--approve", "no")  # memory.write is low risk: no approval needed
    assert run.code == 0, run.err
    s = run.state
    assert {s["first"]["id"], s["second"]["id"]} == {1, 2}
    assert [r["text"] for r in s["acme"]["results"]] == ["Acme charges 10 USD per seat"]
    assert s["acme"]["results"][0]["tags"] == ["pricing", "acme"]
    assert sorted(r["text"] for r in s["tagged"]["results"]) == ["Acme charges 10 USD per seat",
                                                                 "Globex offers a free tier"]
    assert s["free"]["results"][0]["metadata"] == {"source": "web"}


CONCURRENT_MEMORY_PLAN = """
w1: †state.first = memory.write(text="Acme charges 10 USD per seat")
w2: †state.second = memory.write(text="Globex offers a free tier")
@after(w1, w2)
†state.all = memory.search(query="", limit=10)
"""


def test_memory_concurrent_writes_share_one_store(run_plan, monkeypatch):
    import time as _time

    from stdlib_tools import memory

    original = memory.MemoryStore.__init__

    def slow_init(self, *args: Any, **kwargs: Any) -> None:  # widen the race window, deterministically
        _time.sleep(0.05)
        original(self, *args, **kwargs)

    monkeypatch.setattr(memory.MemoryStore, "__init__", slow_init)
    run = run_plan(CONCURRENT_MEMORY_PLAN)
    assert run.code == 0, run.err
    assert {run.state["first"]["id"], run.state["second"]["id"]} == {1, 2}
    assert sorted(r["text"] for r in run.state["all"]["results"]) == [
        "Acme charges 10 USD per seat", "Globex offers a free tier"]


def test_memory_data_flow_and_persistence_between_runs(run_plan, settings, tmp_path):
    cfg = settings(memory_db_path=str(tmp_path / "memory.sqlite"))
    # the search reads the write's result (data flow), so it runs after it
    run = run_plan('†state.saved = memory.write(text="The launch is on Friday", tags=["launch"])\n'
                   '†state.found = memory.search(query="launch", tags=["launch"], limit=†state.saved.id)\n',
                   "--stdlib-config", cfg)
    assert run.code == 0, run.err
    assert [r["text"] for r in run.state["found"]["results"]] == ["The launch is on Friday"]
    run = run_plan('†state.again = memory.search(query="friday")\n', "--stdlib-config", cfg)
    assert run.code == 0, run.err
    assert [r["text"] for r in run.state["again"]["results"]] == ["The launch is on Friday"]
    # the default store is in memory: a new run starts empty
    run = run_plan('†state.none = memory.search(query="friday")\n')
    assert run.code == 0 and run.state["none"]["results"] == []


def test_memory_refusals_through_a_plan(run_plan):
    run = run_plan('†state.saved = memory.write(text="   ")\n'
                   '†state.found = memory.search(query="AND OR NEAR( \\"x*")\n')
    assert run.code == 1 and run.status == "failed"
    assert run.error_of("c1") == "Memory.InvalidArgument"
    # FTS syntax is plain words: no error, nothing found
    assert run.call("c2")["status"] == "succeeded" and run.state["found"] == {"results": []}
    # a limit above 100 is refused by check before anything runs
    run = run_plan('†state.found = memory.search(query="x", limit=1000)\n')
    assert run.code == 1 and run.result["status"] == "invalid" and "E204" in run.err


# --- documents ---------------------------------------------------------------------------------

DOCS_PLAN = """
†state.rows = data.query(value={"v": [{"name": "Acme", "price": 10, "note": "=HYPERLINK(\\"x\\")"}, {"name": "Globex", "price": 12, "note": "ok"}]}, expression="v")
csv: †state.sheet = document.create(path="reports/competitors.csv", rows=†state.rows, columns=["name", "price", "note"])
md: †state.table = document.create(path="reports/competitors.md", rows=†state.rows, title="Competitors")
"""  # noqa: E501 (plan text: one DSL statement per line, kept as written)


def test_document_create_csv_and_markdown(run_plan, sandbox):
    run = run_plan(DOCS_PLAN, "--sandbox", str(sandbox), "--approve", "yes")
    assert run.code == 0, run.err
    s = run.state
    assert s["sheet"]["path"] == "reports/competitors.csv" and s["sheet"]["format"] == "csv"
    assert s["sheet"]["rows"] == 2 and s["sheet"]["columns"] == ["name", "price", "note"]
    assert s["table"]["format"] == "markdown"
    import csv

    with open(sandbox / "reports" / "competitors.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["name", "price", "note"]
    assert rows[1][:2] == ["Acme", "10"] and rows[1][2].startswith("'=")  # formula defused
    assert rows[2] == ["Globex", "12", "ok"]
    md = (sandbox / "reports" / "competitors.md").read_text(encoding="utf-8")
    assert md.startswith("# Competitors")
    assert "| name | price | note |" in md and "| Globex | 12 | ok |" in md
    assert s["table"]["bytes"] == len(md.encode("utf-8"))


def test_documents_example_plan(run_plan, sandbox):
    run = run_plan(EXAMPLES / "documents.plan", "--sandbox", str(sandbox), "--approve", "yes")
    assert run.code == 0, run.err
    assert (sandbox / "reports" / "competitors.csv").read_text(encoding="utf-8").splitlines() == [
        "name,price", "Acme,10", "Globex,12"]
    assert "| Acme | 10 |" in (sandbox / "reports" / "competitors.md").read_text(encoding="utf-8")


def test_document_create_needs_approval_and_stays_in_the_sandbox(run_plan, sandbox, tmp_path):
    plan = '†state.sheet = document.create(path="out.csv", rows=[{"a": 1}])\n'
    run = run_plan(plan, "--sandbox", str(sandbox), "--approve", "no")
    assert run.code == 1 and run.status == "rejected" and run.statuses() == {"c1": "pending"}
    assert not (sandbox / "out.csv").exists()
    run = run_plan('o: †state.a = document.create(path="../escape.csv", rows=[{"a": 1}])\n'
                   'f: †state.b = document.create(path="table.txt", rows=[{"a": 1}])\n',
                   "--sandbox", str(sandbox), "--approve", "yes")
    assert run.code == 1
    assert run.error_of("o") == "Files.OutsideSandbox" and run.error_of("f") == "Document.UnknownFormat"
    assert not (tmp_path / "escape.csv").exists()


# --- email -------------------------------------------------------------------------------------

EMAIL_PLAN = """
input = {"type": "object", "properties": {"team": {"type": "array", "items": {"type": "string"}}}}
†state.total = math.eval(expression="9.5 * 3")
†state.receipt = email.send(to=†input.team, cc="boss@example.com", bcc=["audit@example.com"], subject="Order total", body="The order comes to †state.total EUR.")
"""  # noqa: E501 (plan text: one DSL statement per line, kept as written)


def test_email_send_through_a_plan_to_a_real_smtp_server(run_plan, smtp_settings):
    sink, cfg = smtp_settings
    run = run_plan(EMAIL_PLAN, "--stdlib-config", cfg, "--approve", "yes",
                   "--input", json.dumps({"team": ["team@example.com", "Bob <bob@example.com>"]}))
    assert run.code == 0, run.err
    receipt = run.state["receipt"]
    assert receipt["accepted"] == ["team@example.com", "bob@example.com", "boss@example.com",
                                   "audit@example.com"]
    assert receipt["refused"] == [] and receipt["message_id"].endswith("@example.com>")
    [envelope] = sink.envelopes
    assert envelope.mail_from == "agent@example.com"
    msg = message_from_bytes(envelope.content, policy=default_policy)
    assert msg["Subject"] == "Order total" and msg["Bcc"] is None
    assert msg.get_body(("plain",)).get_content().strip() == "The order comes to 28.5 EUR."


def test_email_example_plan(run_plan, smtp_settings):
    sink, cfg = smtp_settings
    run = run_plan(EXAMPLES / "email.plan", "--stdlib-config", cfg, "--approve", "yes")
    assert run.code == 0, run.err
    assert run.state["receipt"]["accepted"] == ["team@example.com"]
    assert len(sink.envelopes) == 1


def test_email_send_is_high_risk_and_needs_approval(run_plan, smtp_settings):
    sink, cfg = smtp_settings
    run = run_plan(EXAMPLES / "email.plan", "--stdlib-config", cfg, "--approve", "no")
    assert run.code == 1 and run.status == "rejected"
    assert set(run.statuses().values()) == {"pending"}
    assert sink.envelopes == []


def test_email_refusals_through_a_plan(run_plan, smtp_settings):
    sink, cfg = smtp_settings
    run = run_plan('r: †state.a = email.send(to="x@refused.example", subject="s", body="b")\n'
                   'i: †state.b = email.send(to="not-an-address", subject="s", body="b")\n'
                   'h: †state.c = email.send(to="a@example.com", subject="hi\\r\\nBcc: evil@example.com", body="b")\n',
                   "--stdlib-config", cfg, "--approve", "yes")
    assert run.code == 1 and run.status == "failed"
    assert run.error_of("r") == "Email.RecipientsRefused"
    assert run.error_of("i") == "Email.InvalidAddress"
    assert run.error_of("h") == "Email.InvalidHeader"
    assert sink.envelopes == []
    # no SMTP server configured
    run = run_plan('†state.a = email.send(to="a@example.com", subject="s", body="b")\n', "--approve", "yes")
    assert run.code == 1 and run.error_of("c1") == "Email.NotConfigured"


# --- shell -------------------------------------------------------------------------------------

SHELL_PLAN = """
†state.echo = shell.run(command=["echo", "hello from the sandbox"], cwd=".", timeout=10)
†state.cwd = shell.run(command=[†input.python, "-c", "import os; print(os.getcwd())"], cwd="sub", timeout=10)
†state.upper = shell.run(command=[†input.python, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(3)"], stdin="abc", timeout=10)
†state.literal = shell.run(command="echo $HOME; rm -rf / | cat", timeout=10)
"""  # noqa: E501 (plan text: one DSL statement per line, kept as written)


def test_shell_run_when_enabled(run_plan, settings, sandbox):
    (sandbox / "sub").mkdir()
    run = run_plan(SHELL_PLAN, "--stdlib-config", settings(enable_shell=True), "--sandbox", str(sandbox),
                   "--approve", "yes", "--input", json.dumps({"python": sys.executable}))
    assert run.code == 0, run.err
    s = run.state
    assert s["echo"]["exit_code"] == 0 and s["echo"]["stdout"] == "hello from the sandbox\n"
    assert s["cwd"]["stdout"].strip() == str((sandbox / "sub").resolve())
    assert s["upper"]["exit_code"] == 3 and s["upper"]["stdout"].strip() == "ABC"
    assert s["literal"]["stdout"].strip() == "$HOME; rm -rf / | cat"  # no shell ran
    assert not any(v["timed_out"] for v in s.values())


def test_shell_example_plan(run_plan, settings, sandbox):
    run = run_plan(EXAMPLES / "shell.plan", "--stdlib-config", settings(enable_shell=True),
                   "--sandbox", str(sandbox), "--approve", "yes")
    assert run.code == 0, run.err
    assert run.state["greeting"]["stdout"] == "hello from the sandbox\n"


def test_shell_run_is_refused_unless_enabled(run_plan, settings, sandbox):
    plan = '†state.out = shell.run(command=["echo", "hi"])\n'
    for flags in ([], ["--stdlib-config", settings(enable_shell=False)], ["--sandbox", str(sandbox)]):
        run = run_plan(plan, "--approve", "yes", *flags)
        assert run.code == 1 and run.result["status"] == "invalid"  # the plan cannot run: nothing was started
        assert "E201" in run.err and "shell.run" in run.err
    # asking for the shell group without enabling it is a usage error
    run = run_plan(plan, "--approve", "yes", "--stdlib", "shell")
    assert run.code == 2 and "enable_shell" in run.err


def test_shell_run_is_critical_and_confined(run_plan, settings, sandbox, tmp_path):
    cfg = settings(enable_shell=True)
    plan = '†state.out = shell.run(command=["touch", "made.txt"])\n'
    run = run_plan(plan, "--stdlib-config", cfg, "--sandbox", str(sandbox), "--approve", "no")
    assert run.code == 1 and run.status == "rejected" and run.statuses() == {"c1": "pending"}
    assert not (sandbox / "made.txt").exists()
    run = run_plan('a: †state.a = shell.run(command=["true"], cwd="..")\n'
                   'b: †state.b = shell.run(command=["true"], cwd="/tmp")\n'
                   'n: †state.c = shell.run(command=["definitely-not-a-program-xyz"])\n',
                   "--stdlib-config", cfg, "--sandbox", str(sandbox), "--approve", "yes")
    assert run.code == 1
    assert run.error_of("a") == "Files.OutsideSandbox" and run.error_of("b") == "Files.OutsideSandbox"
    assert run.error_of("n") == "Shell.NotFound"


# --- the remaining examples --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["data", "text", "memory"])
def test_offline_example_plans_run(run_plan, name):
    run = run_plan(EXAMPLES / f"{name}.plan", "--approve", "no")
    assert run.code == 0, run.err
    assert set(run.statuses().values()) == {"succeeded"}
    if name == "data":
        assert run.state["check"]["valid"] is True
        assert run.state["record"]["address"] == {"city": "London"}
    elif name == "text":
        assert run.state["message"] == "Prices: Acme: 10 USD | Globex: 12 USD (Acme first)"
        assert run.state["short"]["truncated"] is True
    else:
        assert run.state["recall"]["results"][0]["metadata"] == {"source": "call"}
