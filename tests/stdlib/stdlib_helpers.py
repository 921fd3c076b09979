"""Helpers shared by the stdlib tests (a unique module name: `conftest` may be ambiguous)."""

from __future__ import annotations

import asyncio
from typing import Any

from stdlib_tools import StdlibConfig, all_tools


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def tools_by_name(config: StdlibConfig, only: list[str] | None = None) -> dict[str, Any]:
    return {t.name: t for t in all_tools(config, only=only)}
