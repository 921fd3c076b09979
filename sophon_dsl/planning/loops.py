"""The tool loop detector (seed 002): the last :data:`WINDOW` calls, three patterns.

==================  =====================================  ==========================
pattern             detection                              severity
==================  =====================================  ==========================
``generic_repeat``  the same tool and arguments N times    10 warn, 20 stop, 30 hard
``poll_no_progress`` the same tool and arguments N times   3 warn, 5 stop
                    in a row
``ping_pong``       A, B, A, B, A, B in the last 6 calls   warn
==================  =====================================  ==========================

A *warning* is told to the model (the next turn's context carries it as an error of code
``Loop.Warning``).  A *stop* ends the loop with the named error ``Loop.Detected`` -- but the
model is always told first: a stop on a pattern the model has not been warned about is told
as ``Loop.Detected`` ("the next repeat ends the run") and the loop goes on for one turn; a
repeat after that ends it.  *Hard* (the circuit breaker, 30 repeats) ends the loop at once.

A call's identity is its tool and its arguments as written in the plan (literal values and
the references it reads), so re-reading a changing value counts as the same call.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import Iterable

__all__ = ["LOOP_DETECTED", "LOOP_WARNING", "LoopDetector", "LoopFinding", "WINDOW"]

WINDOW = 30
REPEAT_WARN, REPEAT_STOP, REPEAT_HARD = 10, 20, 30
POLL_WARN, POLL_STOP = 3, 5
PING_PONG_SPAN = 6
LOOP_WARNING = "Loop.Warning"
LOOP_DETECTED = "Loop.Detected"


@dataclass(frozen=True)
class LoopFinding:
    pattern: str      # generic_repeat, poll_no_progress or ping_pong
    severity: str     # warn, stop or hard
    tool: str
    count: int

    @property
    def code(self) -> str:
        return LOOP_WARNING if self.severity == "warn" else LOOP_DETECTED

    def message(self) -> str:
        what = {"generic_repeat": f"{self.tool} was called {self.count} times with the same arguments in "
                                  f"the last {WINDOW} calls",
                "poll_no_progress": f"{self.tool} was called {self.count} times in a row with the same "
                                    "arguments",
                "ping_pong": f"the last {PING_PONG_SPAN} calls alternate between two tools ({self.tool})"}
        then = {"warn": "change approach or give the final output",
                "stop": "the next repeat ends the run",
                "hard": "the run is stopped"}
        return f"{self.pattern}: {what[self.pattern]}; {then[self.severity]}"

    def to_json(self) -> dict:
        return {"code": self.code, "pattern": self.pattern, "severity": self.severity, "tool": self.tool,
                "count": self.count, "message": self.message()}


class LoopDetector:
    """Feed it each call's ``(tool, arguments text)`` with :meth:`observe`; ask :meth:`check`
    after a turn."""

    def __init__(self, window: int = WINDOW):
        self.window: deque[tuple[str, str]] = deque(maxlen=window)
        self.stop_told: set[tuple[str, str]] = set()   # (pattern, tool) told at stop level

    def observe(self, calls: Iterable[tuple[str, str]]) -> None:
        self.window.extend(calls)

    def findings(self) -> list[LoopFinding]:
        found: list[LoopFinding] = []
        if not self.window:
            return found
        key, count = Counter(self.window).most_common(1)[0]
        if count >= REPEAT_WARN:
            sev = "hard" if count >= REPEAT_HARD else "stop" if count >= REPEAT_STOP else "warn"
            found.append(LoopFinding("generic_repeat", sev, key[0], count))
        last = self.window[-1]
        run = 0
        for item in reversed(self.window):
            if item != last:
                break
            run += 1
        if run >= POLL_WARN:
            found.append(LoopFinding("poll_no_progress", "stop" if run >= POLL_STOP else "warn", last[0], run))
        tail = list(self.window)[-PING_PONG_SPAN:]
        if (len(tail) == PING_PONG_SPAN and tail[0] != tail[1] and tail[0::2].count(tail[0]) == PING_PONG_SPAN // 2
                and tail[1::2].count(tail[1]) == PING_PONG_SPAN // 2):
            found.append(LoopFinding("ping_pong", "warn", f"{tail[0][0]} <-> {tail[1][0]}", PING_PONG_SPAN))
        return found

    def check(self) -> tuple[list[LoopFinding], LoopFinding | None]:
        """(what to tell the model, the finding that ends the loop or None)."""
        tell: list[LoopFinding] = []
        for f in self.findings():
            key = (f.pattern, f.tool)
            if f.severity == "hard" or (f.severity == "stop" and key in self.stop_told):
                return tell, f
            if f.severity == "stop":
                self.stop_told.add(key)
            tell.append(f)
        return tell, None
