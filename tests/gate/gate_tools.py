"""Tools of the call-gate matrix: each records what it did in the file named by
``GATE_LOG`` (read at call time, so a tool shipped to a Dask worker in this process or
run by a sub-agent records in the same place)."""

from __future__ import annotations

import json
import os

from sophon_dsl import tool

SECRET = "API_KEY=hunter2"


def log(kind: str, value) -> None:
    with open(os.environ["GATE_LOG"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps([kind, value]) + "\n")


def entries(kind: str | None = None) -> list:
    path = os.environ["GATE_LOG"]
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [v for k, v in rows if kind is None or k == kind]


@tool(risk="high", idempotent=True)
def charge(amount: int) -> int:
    """Charges a card (high risk)."""
    log("charge", amount)
    return amount


@tool(data_flow="local-source", idempotent=True)
def read_secret(name: str = ".env") -> str:
    """Reads a local file."""
    return f"# {name}\n{SECRET}\nDEBUG=1\n"


@tool(idempotent=True)
def lines(text: str) -> list[str]:
    """Splits text into lines."""
    return [line for line in text.splitlines() if line and not line.startswith("#")]


@tool(data_flow="network-sink", idempotent=True)
def send(url: str) -> str:
    """Sends a request (a network sink, low risk)."""
    log("send", url)
    return "ok"


@tool(idempotent=True)
def count(n: int) -> list[int]:
    """0 .. n-1."""
    return list(range(n))


@tool(idempotent=True)
def touch(x: int = 0) -> int:
    """Records that it ran."""
    log("touch", x)
    return x


TOOLS = [charge, read_secret, lines, send, count, touch]
