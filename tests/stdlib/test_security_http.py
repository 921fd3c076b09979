"""Issue 17: http.get / http.request against a hostile server on 127.0.0.1 (decompression
bombs, credentials on redirects, a total deadline)."""

from __future__ import annotations

import gzip
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from stdlib_tools import StdlibConfig
from stdlib_tools.errors import ToolError

from stdlib_helpers import run, tools_by_name

# 64 MiB of zeros, gzipped twice: a few kilobytes on the wire
BOMB = gzip.compress(gzip.compress(b"\0" * (64 << 20), 9), 9)
BOMB1 = gzip.compress(b"a" * (8 << 20))


class _Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.seen.append((self.path, dict(self.headers)))  # type: ignore[attr-defined]
        port = self.server.other_port  # type: ignore[attr-defined]
        if self.path == "/bomb":
            self._send(200, BOMB, {"Content-Encoding": "gzip, gzip", "Content-Type": "text/plain"})
        elif self.path == "/bomb1":
            self._send(200, BOMB1, {"Content-Encoding": "gzip",
                                                               "Content-Type": "text/plain"})
        elif self.path == "/small":
            self._send(200, gzip.compress(gzip.compress(b"hello")), {"Content-Encoding": "gzip, gzip",
                                                                      "Content-Type": "text/plain"})
        elif self.path == "/to-other-port":
            self._send(302, b"", {"Location": f"http://127.0.0.1:{port}/landing"})
        elif self.path == "/to-same-origin":
            self._send(302, b"", {"Location": "/landing"})
        elif self.path == "/to-localhost":
            self._send(302, b"", {"Location": f"http://localhost:{self.server.server_address[1]}/landing"})
        elif self.path == "/drip":
            self.send_response(200)
            self.send_header("Content-Length", "200")
            self.end_headers()
            for _ in range(200):  # a byte every 0.1 s for 20 s: no single read times out
                try:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.1)
        else:
            self._send(200, b"landed", {"Content-Type": "text/plain"})


def _serve() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    server.seen = []  # type: ignore[attr-defined]
    server.other_port = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def servers():
    a, b = _serve(), _serve()
    a.other_port = b.server_address[1]  # type: ignore[attr-defined]
    try:
        yield a, b
    finally:
        for s in (a, b):
            s.shutdown()
            s.server_close()


def _tools(**kw: Any) -> dict[str, Any]:
    return tools_by_name(StdlibConfig(http_allow_list=("127.0.0.1", "localhost"), **kw), ["http"])


def _peak(coro: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        out = run(coro)
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_nested_gzip_bomb_is_cut_while_decoding(servers):
    a, _ = servers
    t = _tools(http_max_response_bytes=100_000)
    out, peak = _peak(t["http.get"](url=f"http://127.0.0.1:{a.server_address[1]}/bomb"))
    assert out["truncated"] is True and out["bytes"] == 100_000
    assert peak < 16 << 20  # the 64 MiB body was never held


def test_single_gzip_body_is_capped_while_decoding(servers):
    a, _ = servers
    t = _tools(http_max_response_bytes=50_000)
    out, peak = _peak(t["http.get"](url=f"http://127.0.0.1:{a.server_address[1]}/bomb1"))
    assert out["truncated"] is True and out["bytes"] == 50_000 and out["text"] == "a" * 50_000
    assert peak < 6 << 20


def test_nested_gzip_small_body_still_decodes(servers):
    a, _ = servers
    out = run(_tools()["http.get"](url=f"http://127.0.0.1:{a.server_address[1]}/small"))
    assert out["text"] == "hello" and out["truncated"] is False


SECRETS = {"Authorization": "Bearer s3cret", "Cookie": "sid=1", "Proxy-Authorization": "Basic eA==",
           "X-Api-Key": "k-123", "X-Auth-Token": "t-9", "Accept": "text/plain"}


def _headers_seen(server: Any, path: str) -> dict[str, str]:
    return {k.lower(): v for k, v in next(h for p, h in server.seen if p == path).items()}


def test_credentials_are_dropped_on_a_redirect_to_another_port(servers):
    a, b = servers
    out = run(_tools()["http.request"](method="GET", url=f"http://127.0.0.1:{a.server_address[1]}/to-other-port",
                                       headers=SECRETS))
    assert out["text"] == "landed"
    landed = _headers_seen(b, "/landing")
    for name in ("authorization", "cookie", "proxy-authorization", "x-api-key", "x-auth-token"):
        assert name not in landed, name
    assert landed["accept"] == "text/plain"


def test_credentials_are_dropped_on_a_redirect_to_another_host(servers):
    a, _ = servers
    run(_tools()["http.get"](url=f"http://127.0.0.1:{a.server_address[1]}/to-localhost", headers=SECRETS))
    landed = _headers_seen(a, "/landing")
    assert not {"authorization", "cookie", "proxy-authorization", "x-api-key", "x-auth-token"} & set(landed)


def test_credentials_are_kept_on_a_same_origin_redirect(servers):
    a, _ = servers
    run(_tools()["http.get"](url=f"http://127.0.0.1:{a.server_address[1]}/to-same-origin", headers=SECRETS))
    landed = _headers_seen(a, "/landing")
    assert landed["authorization"] == "Bearer s3cret" and landed["x-api-key"] == "k-123"


def test_the_timeout_is_a_total_deadline_not_per_read(servers):
    a, _ = servers
    t = _tools(http_timeout=1.0)
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            run(t["http.get"](url=f"http://127.0.0.1:{a.server_address[1]}/drip"))
        except ToolError as exc:
            box["code"] = exc.code

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(15)  # the server drips for 20 s; a per-read timeout of 1 s never fires
    assert not worker.is_alive()
    assert box.get("code") == "Http.Timeout"
