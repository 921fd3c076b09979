"""The CLI configures OpenTelemetry from the standard environment variables (issue 29 item 2)
and sends spans with the OTLP/HTTP exporter to a collector: here a local receiver."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = Path(__file__).resolve().parents[2]

TOOLS = '''
from sophon_dsl import tool

@tool
def fetch(url: str) -> str:
    return "page " + url
'''


class _Receiver(http.server.BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        _Receiver.requests.append((self.path, self.headers.get("Content-Type"), req))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


@pytest.fixture
def receiver():
    _Receiver.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _cli(tmp_path, env_extra, *args):
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "p.plan").write_text('†state.a = fetch(url="u")\n†state.b = fetch(url=†state.a)\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(env_extra, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "sophon_dsl", *args, str(tmp_path / "p.plan"), "--tools",
                           str(tmp_path / "tools.py"), "--no-store", "--json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_setting_the_endpoint_is_all_it_takes(receiver, tmp_path):
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    proc = _cli(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "my-agent"}, "run")
    assert proc.returncode == 0, proc.stderr
    assert '"status": "succeeded"' in proc.stdout
    assert _Receiver.requests, "no spans were exported"
    names, services = [], set()
    for path, ctype, req in _Receiver.requests:
        assert path == "/v1/traces" and ctype == "application/x-protobuf"
        for rs in req.resource_spans:
            services |= {a.value.string_value for a in rs.resource.attributes if a.key == "service.name"}
            for ss in rs.scope_spans:
                assert ss.scope.name == "sophon_dsl"
                names += [s.name for s in ss.spans]
    assert services == {"my-agent"}
    assert sorted(names) == ["sophon.call fetch", "sophon.call fetch", "sophon.run"]


def test_default_service_name_and_bad_settings(receiver, tmp_path):
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    proc = _cli(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, "run")
    assert proc.returncode == 0, proc.stderr
    services = {a.value.string_value for _, _, req in _Receiver.requests for rs in req.resource_spans
                for a in rs.resource.attributes if a.key == "service.name"}
    assert services == {"sophon-dsl"}
    # a protocol the Python exporters do not speak: a usage error, no traceback
    proc = _cli(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "run")
    assert proc.returncode == 2 and "OTEL_EXPORTER_OTLP_PROTOCOL='http/json' is not supported" in proc.stderr
    assert "Traceback" not in proc.stderr
    # OTEL_TRACES_EXPORTER=none / OTEL_SDK_DISABLED turn it off
    _Receiver.requests = []
    for off in ({"OTEL_TRACES_EXPORTER": "none"}, {"OTEL_SDK_DISABLED": "true"}):
        proc = _cli(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, **off}, "run")
        assert proc.returncode == 0, proc.stderr
    assert _Receiver.requests == []


def test_an_unreachable_collector_does_not_change_the_result(tmp_path):
    with socket_port() as port:  # a port nothing listens on
        pass
    proc = _cli(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                           "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}, "run")
    assert proc.returncode == 0, proc.stderr
    assert '"status": "succeeded"' in proc.stdout and "Traceback" not in proc.stderr


class socket_port:
    def __enter__(self):
        import socket

        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        return self.s.getsockname()[1]

    def __exit__(self, *a):
        self.s.close()
