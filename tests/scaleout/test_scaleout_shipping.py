"""What travels to Dask workers carries no secret the tool does not need (issue 24, item 9):
a standard tool's pickle holds only its group's slice of the StdlibConfig, so the SMTP
password travels with ``email.send`` and with nothing else."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

import sophon_dsl
from sophon_dsl.scaleout import DaskExecutor, preflight
from sophon_dsl.tools import as_registry

SECRET = "hunter2-secret"


def _config(tmp_path, **kw):
    from stdlib_tools import StdlibConfig

    return StdlibConfig(sandbox_root=str(tmp_path), smtp_password=SECRET, smtp_user="agent-user",
                        memory_db_path=":memory:", **kw)


@pytest.fixture
def shipped(monkeypatch):
    """Every (tool name, pickle) the preflight ships to the workers during the test."""
    sent: list[tuple[str, bytes]] = []
    real = preflight.ship

    def recording(name, func):
        out = real(name, func)
        sent.append((name, out.blob))
        return out

    monkeypatch.setattr(preflight, "ship", recording)
    return sent


@pytest.fixture
def web():
    """A real HTTP server on 127.0.0.1: its URL."""
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"hello from the web"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_files_read_and_http_get_travel_without_the_smtp_password(proc_cluster, tmp_path, shipped, web):
    (tmp_path / "notes.txt").write_text("local notes")
    registry = as_registry(None, stdlib=_config(tmp_path, http_allow_list=("127.0.0.1",)))
    plan = f'$state.f = files.read(path="notes.txt")\n$state.h = http.get(url="{web}")\n'
    result = sophon_dsl.run(plan, registry, tool_executor=DaskExecutor(proc_cluster.scheduler_address))
    assert result.status == "succeeded", result.error
    assert result.state["state"]["f"]["content"] == "local notes"  # ran on a worker process
    assert "hello from the web" in str(result.state["state"]["h"])
    assert sorted(name for name, _ in shipped) == ["files.read", "http.get"]
    for name, blob in shipped:
        assert SECRET.encode() not in blob and b"agent-user" not in blob, name


def test_no_standard_tool_but_email_send_pickles_the_smtp_password(tmp_path):
    # every tool that can be shipped at all (memory tools hold a lock: local only, E704)
    import stdlib_tools
    from sophon_dsl.scaleout.ship import ship

    carried = set()
    for spec in stdlib_tools.all_tools(_config(tmp_path, enable_shell=True)):
        out = ship(spec.name, spec.func)
        if out.blob is not None and SECRET.encode() in out.blob:
            carried.add(spec.name)
    assert carried == {"email.send"}


@pytest.fixture
def smtp():
    """A real SMTP server on 127.0.0.1 that requires a login: (messages, logins, port)."""
    pytest.importorskip("aiosmtpd")
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult

    messages, logins = [], []

    class Sink:
        async def handle_DATA(self, server, session, envelope):
            messages.append(envelope)
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data):
        logins.append((auth_data.login.decode(), auth_data.password.decode()))
        return AuthResult(success=auth_data.password == SECRET.encode())

    with socket.socket() as probe:  # aiosmtpd's controller cannot bind port 0 itself
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Sink(), hostname="127.0.0.1", port=port, authenticator=authenticator,
                            auth_require_tls=False)
    controller.start()
    try:
        yield messages, logins, port
    finally:
        controller.stop()


def test_email_send_still_logs_in_on_a_worker(proc_cluster, tmp_path, smtp, shipped):
    messages, logins, port = smtp
    registry = as_registry(None, stdlib=_config(tmp_path, smtp_host="127.0.0.1", smtp_port=port,
                                                smtp_sender="agent@example.com", smtp_starttls=False))
    plan = '$state.m = email.send(to="team@example.com", subject="s", body="b")\n'
    result = sophon_dsl.run(plan, registry, approve=True,
                            tool_executor=DaskExecutor(proc_cluster.scheduler_address))
    assert result.status == "succeeded", result.error
    assert [name for name, _ in shipped] == ["email.send"]  # it went to the cluster
    assert logins == [("agent-user", SECRET)] and len(messages) == 1


def test_the_memory_tools_stay_in_the_coordinator(proc_cluster, tmp_path, shipped):
    # their store (a SQLite file behind a lock) is this process's: routed, they were refused
    # (E704, the lock cannot be pickled); now they run here and the rest still goes out
    registry = as_registry(None, stdlib=_config(tmp_path))
    plan = ('$state.m = memory.write(text="remember the shipping test")\n'
            '@after(c1) $state.s = memory.search(query="shipping")\n'
            '$state.t = text.truncate(value="abcdef", max_chars=3)\n')
    ex = DaskExecutor(proc_cluster.scheduler_address)
    result = sophon_dsl.run(plan, registry, tool_executor=ex)
    assert result.status == "succeeded", result.error
    assert "remember the shipping test" in str(result.state["state"]["s"])
    assert [name for name, _ in shipped] == ["text.truncate"]
    assert [k.split("/")[1] for k in ex.last_keys] == ["c3"]
