"""A hang guard for tests of work that must be bounded: run ``fn()`` in a daemon thread
(a runaway computation holding the GIL cannot be interrupted, but it cannot hold the test
either) and fail the test when it has not ended within ``limit`` seconds."""

from __future__ import annotations

import threading
from typing import Any, Callable


def finishes(fn: Callable[[], Any], limit: float = 60.0, hung: str = "still running") -> Any:
    """``fn()``'s value (or its exception, raised here); AssertionError ``hung`` when it
    has not ended after ``limit`` seconds."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(limit)
    assert not worker.is_alive(), hung
    if "error" in box:
        raise box["error"]
    return box["value"]
