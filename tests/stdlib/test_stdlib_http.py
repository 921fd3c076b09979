"""http.get / http.request: the SSRF guard on every hop, caps, redirects; offline
(httpx.MockTransport, or a real server on 127.0.0.1)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from stdlib_tools import StdlibConfig
from stdlib_tools.errors import ToolError

from stdlib_helpers import run, tools_by_name

PUBLIC = "93.184.216.34"


def mock_config(handler, **kw) -> StdlibConfig:
    return StdlibConfig(http_transport=httpx.MockTransport(handler), **kw)


def http_tools(config):
    return tools_by_name(config, ["http"])


def test_get_json_through_mock(fake_dns):
    fake_dns["api.example.com"] = [PUBLIC]
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True, "q": request.url.params.get("q")})

    t = http_tools(mock_config(handler))
    out = run(t["http.get"](url="https://api.example.com/search", params={"q": "sophon"}))
    assert out["status"] == 200 and out["json"] == {"ok": True, "q": "sophon"}
    assert out["truncated"] is False and out["redirects"] == []
    assert out["url"] == "https://api.example.com/search?q=sophon"
    assert seen[0].headers["user-agent"].startswith("sophon-dsl")


def test_request_post_json(fake_dns):
    fake_dns["api.example.com"] = [PUBLIC]

    def handler(request):
        return httpx.Response(201, text=request.method + " " + request.content.decode(),
                              headers={"content-type": "text/plain"})

    t = http_tools(mock_config(handler))
    out = run(t["http.request"](method="post", url="https://api.example.com/items", json={"a": 1}))
    assert out["status"] == 201 and out["text"] == 'POST {"a": 1}' and out["json"] is None


@pytest.mark.parametrize("url", [
    "http://2130706433/", "http://0x7f.0.0.1/", "http://0177.0.0.1/", "http://[::1]/",
    "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/", "http://10.0.0.1/", "http://192.168.0.1/",
    "http://172.16.5.4/", "http://0.0.0.0:8000/",
])
def test_blocked_before_any_request(url, fake_dns):
    calls = []
    t = http_tools(mock_config(lambda r: calls.append(r) or httpx.Response(200)))
    with pytest.raises(ToolError) as err:
        run(t["http.get"](url=url))
    assert err.value.code == "Http.Blocked"
    assert calls == []


def test_dns_name_resolving_to_private_range(fake_dns):
    fake_dns["intranet.example.com"] = ["172.20.1.1"]
    calls = []
    t = http_tools(mock_config(lambda r: calls.append(r) or httpx.Response(200)))
    with pytest.raises(ToolError) as err:
        run(t["http.get"](url="https://intranet.example.com/"))
    assert err.value.code == "Http.Blocked" and calls == []


@pytest.mark.parametrize("target", [
    "http://127.0.0.1:8080/admin", "http://2130706433/", "http://[::ffff:127.0.0.1]/",
    "http://169.254.169.254/latest/meta-data/", "http://internal.example.com/",
    "http://metadata.google.internal/", "/../../", "file:///etc/passwd",
])
def test_redirect_to_private_range_is_refused(target, fake_dns):
    fake_dns["public.example.com"] = [PUBLIC]
    fake_dns["internal.example.com"] = ["10.0.0.8"]
    requested = []

    def handler(request):
        requested.append(str(request.url))
        if request.url.host == "public.example.com" and request.url.path == "/start":
            return httpx.Response(302, headers={"location": target})
        return httpx.Response(200, text="secret")

    t = http_tools(mock_config(handler))
    if target == "/../../":  # a relative redirect stays on the public host: allowed
        out = run(t["http.get"](url="https://public.example.com/start"))
        assert out["status"] == 200 and out["redirects"] == ["https://public.example.com/"]
        return
    with pytest.raises(ToolError) as err:
        run(t["http.get"](url="https://public.example.com/start"))
    assert err.value.code == "Http.Blocked"
    assert requested == ["https://public.example.com/start"]  # the private hop was never sent


def test_redirect_chain_checked_on_every_hop(fake_dns):
    fake_dns["a.example.com"] = [PUBLIC]
    fake_dns["b.example.com"] = [PUBLIC]
    fake_dns["c.example.com"] = ["192.168.7.7"]
    hops = {"a.example.com": "https://b.example.com/2", "b.example.com": "https://c.example.com/3"}
    requested = []

    def handler(request):
        requested.append(request.url.host)
        return httpx.Response(307, headers={"location": hops.get(request.url.host, "/")})

    t = http_tools(mock_config(handler))
    with pytest.raises(ToolError) as err:
        run(t["http.get"](url="https://a.example.com/1"))
    assert err.value.code == "Http.Blocked" and requested == ["a.example.com", "b.example.com"]


def test_redirects_followed_and_303_becomes_get(fake_dns):
    fake_dns["api.example.com"] = [PUBLIC]
    fake_dns["other.example.com"] = [PUBLIC]
    seen = []

    def handler(request):
        seen.append((request.method, str(request.url), request.headers.get("authorization")))
        if request.url.path == "/submit":
            return httpx.Response(303, headers={"location": "https://other.example.com/done"})
        return httpx.Response(200, json={"done": True})

    t = http_tools(mock_config(handler))
    out = run(t["http.request"](method="POST", url="https://api.example.com/submit", body="x=1",
                                headers={"Authorization": "Bearer s3cret"}))
    assert out["json"] == {"done": True} and out["redirects"] == ["https://other.example.com/done"]
    assert seen[1][0] == "GET"
    assert seen[1][2] is None  # credentials are not forwarded to another host


def test_too_many_redirects(fake_dns):
    fake_dns["loop.example.com"] = [PUBLIC]
    t = http_tools(mock_config(lambda r: httpx.Response(302, headers={"location": "/again"}),
                               http_max_redirects=3))
    with pytest.raises(ToolError) as err:
        run(t["http.get"](url="https://loop.example.com/"))
    assert err.value.code == "Http.TooManyRedirects"


def test_redirect_not_followed_when_disabled(fake_dns):
    fake_dns["api.example.com"] = [PUBLIC]
    t = http_tools(mock_config(lambda r: httpx.Response(302, headers={"location": "http://127.0.0.1/"})))
    out = run(t["http.request"](method="GET", url="https://api.example.com/", follow_redirects=False))
    assert out["status"] == 302 and out["headers"]["location"] == "http://127.0.0.1/"


def test_response_size_cap(fake_dns):
    fake_dns["big.example.com"] = [PUBLIC]
    t = http_tools(mock_config(lambda r: httpx.Response(200, content=b"a" * 5000,
                                                        headers={"content-type": "application/json"}),
                               http_max_response_bytes=1000))
    out = run(t["http.get"](url="https://big.example.com/"))
    assert out["truncated"] is True and out["bytes"] == 1000 and len(out["text"]) == 1000
    assert out["json"] is None


def test_invalid_method_and_url(fake_dns):
    t = http_tools(mock_config(lambda r: httpx.Response(200)))
    with pytest.raises(ToolError) as err:
        run(t["http.request"](method="TRACE", url="https://example.com/"))
    assert err.value.code == "Http.InvalidMethod"
    with pytest.raises(ToolError) as err:
        run(t["http.get"](url="not a url"))
    assert err.value.code in ("Http.InvalidUrl", "Http.Blocked")


# --- a real server on 127.0.0.1 ---------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    hits: list[str] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        type(self).hits.append(self.path)
        if self.path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", self.path.split("=", 1)[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/slow":
            time.sleep(0.6)
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the client gave up (timeout test)
            pass


@pytest.fixture
def server():
    _Handler.hits = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_local_server_refused_without_allow_list(server):
    t = http_tools(StdlibConfig())
    with pytest.raises(ToolError) as err:
        run(t["http.get"](url=f"http://127.0.0.1:{server}/data"))
    assert err.value.code == "Http.Blocked" and _Handler.hits == []


def test_local_server_allowed_by_allow_list(server):
    t = http_tools(StdlibConfig(http_allow_list=("127.0.0.1",)))
    out = run(t["http.get"](url=f"http://127.0.0.1:{server}/data"))
    assert out["status"] == 200 and out["json"] == {"path": "/data"}


def test_real_redirect_to_private_address_refused(server, monkeypatch):
    # the allow-list lets the first hop ("localhost" by name) through; the redirect target is
    # 127.0.0.1 by address, which is not allowed
    from stdlib_tools import netguard
    monkeypatch.setattr(netguard, "resolve_host", lambda h, p=None: ["127.0.0.1"])
    t = http_tools(StdlibConfig(http_allow_list=("localhost",)))
    ok = run(t["http.get"](url=f"http://localhost:{server}/plain"))
    assert ok["json"] == {"path": "/plain"}
    for target in (f"http://127.0.0.1:{server}/secret", f"http://2130706433:{server}/secret",
                   f"http://[::ffff:127.0.0.1]:{server}/secret"):
        with pytest.raises(ToolError) as err:
            run(t["http.get"](url=f"http://localhost:{server}/redirect?to={target}"))
        assert err.value.code == "Http.Blocked"
    assert not any(h.startswith("/secret") for h in _Handler.hits)


def test_dns_rebinding_between_check_and_connect(server, monkeypatch):
    # the first lookup (the URL check) answers a public address, the next one (at connect time)
    # a private one: the connection-level guard refuses it
    from stdlib_tools import netguard
    answers = iter([[PUBLIC], ["127.0.0.1"], ["127.0.0.1"]])
    monkeypatch.setattr(netguard, "resolve_host", lambda h, p=None: next(answers))
    t = http_tools(StdlibConfig())
    with pytest.raises(ToolError) as err:
        run(t["http.get"](url=f"http://rebind.example.com:{server}/secret"))
    assert err.value.code == "Http.Blocked" and _Handler.hits == []


def test_timeout(server):
    t = http_tools(StdlibConfig(http_allow_list=("127.0.0.0/8",), http_timeout=0.2))
    with pytest.raises(ToolError) as err:
        run(t["http.get"](url=f"http://127.0.0.1:{server}/slow"))
    assert err.value.code == "Http.Timeout"
