"""Offline stand-ins for the tools of the competitors example.

``sophon-dsl check examples/competitors.plan --tools examples/competitors_tools.py``
registers every ``@tool`` defined here.
"""

from __future__ import annotations

import hashlib
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from sophon_dsl import tool

_FACTS = {
    "acme corp": {"name": "Acme Corp", "founded": 1948, "employees": 1200, "pricing": "enterprise"},
    "globex": {"name": "Globex", "founded": 1989, "employees": 5400, "pricing": "per seat"},
    "initech": {"name": "Initech", "founded": 1996, "employees": 300, "pricing": "freemium"},
}


class Company(TypedDict):
    name: str
    founded: int
    employees: int
    pricing: str


class Sheet(TypedDict):
    title: str
    csv: str
    markdown: str


class Receipt(TypedDict):
    message_id: str
    recipients: list[str]


@tool(name="web.search", risk="low")
def web_search(query: str) -> Company:
    """Look a company up (offline: answers from a fixed table)."""
    key = query.strip().lower()
    if key not in _FACTS:
        raise LookupError(f"no results for {query!r}")
    return Company(**_FACTS[key])


@tool(name="sheet.create")
def sheet_create(title: str, rows: list[Company]) -> Sheet:
    """Build a comparison table (CSV and Markdown) from company records."""
    columns = ["name", "founded", "employees", "pricing"]
    csv_lines = [",".join(columns)] + [",".join(str(r[c]) for c in columns) for r in rows]
    md = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    md += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    return Sheet(title=title, csv="\n".join(csv_lines), markdown="\n".join(md))


@tool(name="gmail.send", risk="medium")
def gmail_send(to: list[str], subject: str, body: str) -> Receipt:
    """Send an email (offline: returns a receipt without sending anything)."""
    if not to:
        raise ValueError("no recipients")
    digest = hashlib.sha256(f"{subject}\n{body}".encode()).hexdigest()[:10]
    return Receipt(message_id=f"msg-{digest}", recipients=list(to))
