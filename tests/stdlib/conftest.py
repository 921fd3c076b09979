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
