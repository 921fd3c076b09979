"""Offline tools for the seed-000 ExecutionPlan (``examples/seed000/plan.json``).

``web.search`` and ``gmail.send`` are the competitors example's; ``document.create`` (the
seed's hint for the spreadsheet step) builds the comparison table, and ``browser.navigate``
is there so every hint of the seed's plan names a tool.
"""

from __future__ import annotations

import os
import sys

from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from sophon_dsl import tool

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from competitors_tools import Company, Sheet, gmail_send, sheet_create, web_search  # noqa: F401


class Page(TypedDict):
    url: str
    text: str


@tool(name="document.create")
def document_create(title: str, rows: list[Company]) -> Sheet:
    """Create a comparison spreadsheet (CSV and Markdown) from company records."""
    return sheet_create.func(title=title, rows=rows)


@tool(name="browser.navigate", risk="low")
def browser_navigate(url: str) -> Page:
    """Open a page (offline: an empty page)."""
    return Page(url=url, text="")
