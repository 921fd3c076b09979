from __future__ import annotations

import pytest


@pytest.fixture
def sandbox(tmp_path):
    root = tmp_path / "sandbox"
    root.mkdir()
    return root


@pytest.fixture
def fake_dns(monkeypatch):
    """Map host names to addresses in netguard's resolver; unknown names fail to resolve."""
    from stdlib_tools import netguard
    from stdlib_tools.errors import ToolError

    table: dict[str, list[str]] = {}
    calls: list[str] = []

    def resolve(host: str, port: int | None = None) -> list[str]:
        calls.append(host)
        if host not in table:
            raise ToolError("Http.DnsFailure", f"cannot resolve {host!r}")
        value = table[host]
        return list(value() if callable(value) else value)

    monkeypatch.setattr(netguard, "resolve_host", resolve)
    table_calls = table
    table_calls["__calls__"] = calls  # type: ignore[assignment]
    return table


class SmtpSink:
    """An aiosmtpd handler that keeps every accepted message and refuses @refused.example."""

    def __init__(self) -> None:
        self.envelopes: list = []

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.endswith("@refused.example"):
            return "550 no such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.envelopes.append(envelope)
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp_server():
    """A real SMTP server on 127.0.0.1: yields (sink, port)."""
    pytest.importorskip("aiosmtpd")
    import socket

    from aiosmtpd.controller import Controller

    with socket.socket() as probe:  # aiosmtpd's controller cannot use port 0 itself
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sink = SmtpSink()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield sink, port
    finally:
        controller.stop()
