"""A run's time and memory bounds, held from outside the event loop.

``max_time`` is enforced first by the scheduler's own wait on the run's end
(``asyncio.wait_for``), but that fires only when the event loop gets control back.  Work
that runs on the loop without awaiting (a reference's JMESPath, a map expanding its items,
a long chain of calls deciding their inputs) would hold the run past its limit, and
nothing on the loop can watch memory while the loop is busy growing it.

So a run with ``max_time`` or ``max_memory`` gets a :class:`Watchdog`: a daemon thread
that, at the deadline or once the process has grown by more than ``max_memory`` bytes
since the run started, *trips*: the scheduler's stop flag is set from this thread and the
loop is woken.  Every cooperative loop of the run looks at that flag (the scheduler's
dispatch, the map driver's expansion, the JMESPath interpreter every 1,024 steps), so
the work stops at its next check and the run ends with ``Plan.Timeout`` or
``Plan.MemoryExceeded``.

Memory is sampled as the resident set size (``/proc/self/statm``; elsewhere the peak RSS
from ``getrusage``) every 50 ms.  It bounds the *process*: with several runs in one
process, each run's budget sees the others' growth too.  A single allocation made in C
between two samples (``"x" * 10**9`` in a tool) is seen only once it is done; the bounds
at the source (results, references, templates, replies: docs/security.md) are what stop
such values before they are built.
"""

from __future__ import annotations

from ..errors import OptionError

import asyncio
import os
import sys
import threading
import time
from typing import Any, Callable, Coroutine

__all__ = ["SAMPLE_INTERVAL", "Watchdog", "memory_supported", "parse_size", "rss_bytes", "run_sync"]

SAMPLE_INTERVAL = 0.05  # seconds between two RSS samples (about 10 us each)

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_STATM = "/proc/self/statm"


def rss_bytes() -> int | None:
    """The process's resident set size in bytes (the peak where the current one cannot be
    read), or None when this platform offers neither."""
    try:
        with open(_STATM, "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:  # (Windows)
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


def memory_supported() -> bool:
    """Whether ``max_memory`` can be enforced here (the RSS can be read)."""
    return rss_bytes() is not None


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TB": 1 << 40,
          "TIB": 1 << 40}


def parse_size(text: str) -> int:
    """``"2G"``, ``"512M"``, ``"64KiB"``, ``"1000000"`` -> bytes (binary units: K = 1024).
    ValueError for anything else, or a size under one byte."""
    s = str(text).strip().upper().replace("_", "")
    i = len(s)
    while i and not (s[i - 1].isdigit() or s[i - 1] == "."):
        i -= 1
    number, unit = s[:i].strip(), s[i:].strip()
    if not number or unit not in _UNITS:
        raise OptionError(f"not a size: {text!r} (write bytes, or a number with K, M, G or T: 2G, 512M)")
    try:
        value = float(number) if "." in number else int(number)
    except ValueError:
        raise OptionError(f"not a size: {text!r} (write bytes, or a number with K, M, G or T: 2G, 512M)") from None
    size = int(value * _UNITS[unit])
    if size < 1:
        raise OptionError(f"a size must be at least one byte, not {text!r}")
    return size


class Watchdog:
    """Calls ``trip(why)`` from its own thread, once: ``"timeout"`` at ``deadline`` (a
    ``time.monotonic()`` value), ``"memory"`` when the RSS has grown by more than
    ``max_memory`` bytes since :meth:`start`.  :meth:`stop` ends it (the run ended)."""

    def __init__(self, trip: Callable[[str], None], *, deadline: float | None = None,
                 max_memory: int | None = None, interval: float = SAMPLE_INTERVAL) -> None:
        self.trip = trip
        self.deadline = deadline
        self.max_memory = max_memory
        self.interval = interval
        self.tripped: str | None = None
        self._ended = threading.Event()
        self._base: int | None = None

    def start(self) -> None:
        if self.max_memory is not None:
            self._base = rss_bytes()
        threading.Thread(target=self._watch, name="sophon-watchdog", daemon=True).start()

    def stop(self) -> None:
        self._ended.set()

    def _watch(self) -> None:
        deadline, budget, base = self.deadline, self.max_memory, self._base
        while True:
            wait = self.interval if budget is not None and base is not None else None
            if deadline is not None:
                # (an hour at most per wait: a far deadline, max_time=1e12, is past what a
                # lock's timeout accepts)
                left = min(max(deadline - time.monotonic(), 0.0), 3600.0)
                wait = left if wait is None else min(wait, left)
            if self._ended.wait(wait):
                return
            if budget is not None and base is not None:
                now = rss_bytes()
                if now is not None and now - base > budget:
                    self._fire("memory")
                    return
            if deadline is not None and time.monotonic() >= deadline:
                self._fire("timeout")
                return

    def _fire(self, why: str) -> None:
        if self._ended.is_set():
            return
        self.tripped = why
        try:
            self.trip(why)
        except Exception:  # noqa: BLE001 - the loop closed meanwhile: the run has ended anyway
            pass


_LEFT_BEHIND: list = []  # loops kept from the garbage collector with their abandoned tasks (see run_sync)


def run_sync(main: Coroutine[Any, Any, Any], grace: float = 0.5) -> Any:
    """``asyncio.run(main)``, except at the end: tasks still running once ``main`` returned
    are cancelled and waited for at most ``grace`` seconds.  ``asyncio.run`` waits for them
    without end, so an async tool that swallows its cancellation (the call a stopped run
    abandoned) would hold the caller forever after the run itself returned.  Then the loop
    is left as it is, not closed (its tasks frozen; the process usually exits next)."""
    runner = asyncio.Runner()
    try:
        result = runner.run(main)
    except BaseException:
        _close(runner, grace)
        raise
    _close(runner, grace)
    return result


def _close(runner: asyncio.Runner, grace: float) -> None:
    if runner.run(_cancel_others(grace)):
        _LEFT_BEHIND.append(runner)  # (closing would wait for them: asyncio.Runner.close)
        # their records already say they were cancelled: no "Task was destroyed but it is
        # pending!" when the interpreter exits
        runner.get_loop().set_exception_handler(_quiet_about_pending)
        asyncio.set_event_loop(None)
        return
    runner.close()


def _quiet_about_pending(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    if "destroyed but it is pending" not in str(context.get("message", "")):
        loop.default_exception_handler(context)


async def _cancel_others(grace: float) -> bool:
    """Cancel every other task of this loop; whether some are still running after ``grace`` s."""
    me = asyncio.current_task()
    others = [t for t in asyncio.all_tasks() if t is not me]
    for t in others:
        t.cancel()
    if not others:
        return False
    _, left = await asyncio.wait(others, timeout=grace)
    return bool(left)
