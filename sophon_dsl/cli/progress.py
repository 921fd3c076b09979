"""The live progress view of ``sophon-dsl run``, built on the runtime's events: on a
terminal a rich table shows each call going pending -> running -> done, under a line
with done/total and the elapsed time (a plan longer than the terminal shows its running
calls first, then failures, the next pending calls and the latest successes, and counts
the rest); elsewhere one line per event goes to stderr."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, TextIO

from ..diagnostics import visible

__all__ = ["ProgressView", "step_detail"]

_STYLE = {
    "pending": "dim", "running": "yellow", "succeeded": "green", "failed": "red",
    "skipped": "magenta", "cancelled": "red", "retrying": "yellow",
}
_STEP_STATUS = {
    "plan_step_start": "running", "plan_step_complete": "succeeded", "plan_step_failed": "failed",
    "plan_step_skipped": "skipped", "plan_step_cancelled": "cancelled", "plan_step_retry": "retrying",
}
_ENDED = frozenset(("succeeded", "failed", "skipped", "cancelled"))
# which rows a plan taller than the terminal keeps, most wanted first
_KEEP = {"running": 0, "retrying": 0, "failed": 1, "cancelled": 1, "pending": 2, "succeeded": 3, "skipped": 3}
_CHROME_ROWS = 4  # the summary line, the table header, the "... more" row and the cursor's line


def step_detail(event: Any) -> str:
    """What a call's event says besides its status: the error (of a failure or of the attempt
    a retry follows), a skip's reason, or the result's preview (``null`` for a tool that
    returned nothing)."""
    t = event.type
    err = event.error or {}
    if t in ("plan_step_failed", "plan_step_cancelled") and err:
        return f"{err.get('error')}: {err.get('cause')}"
    if t == "plan_step_retry":
        why = f" ({err.get('error')}: {err.get('cause')})" if err else ""
        return f"attempt {event.attempt} failed{why}; retrying"
    if t in ("plan_step_skipped", "plan_step_cancelled"):
        return event.reason or ""
    if t == "plan_step_complete":
        return "null" if event.preview is None else event.preview
    return event.preview or ""


class ProgressView:
    """Shows each call's status as events arrive."""

    def __init__(self, plan: Any, ids: list[str], stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic, height: int | None = None):
        self.stream: TextIO = stream or sys.stderr
        self.ids = ids
        self.tools = [c.tool for c in plan.calls]
        self.status = ["pending"] * len(ids)
        self.detail = [""] * len(ids)
        self.ended_at = [0] * len(ids)  # the order calls ended in (for "latest" rows)
        self.ends = 0
        self.clock = clock
        self.started = clock()
        self.height = height  # rows the terminal shows (None: ask the console)
        self.live = None
        self.interactive = self.stream.isatty()
        self.outputs_ready: list[str] | None = None  # the fire-and-forget calls the run still waits for

    # -- state -------------------------------------------------------------------------------

    def __call__(self, event: Any) -> None:
        if event.type == "plan_start":
            self.started = self.clock()
        elif event.type == "outputs_ready":  # only fire-and-forget calls are left: say what the run waits for
            self.outputs_ready = list((event.data or {}).get("waiting_for") or ())
        idx = event.step_index
        if event.type in _STEP_STATUS and idx is not None and 0 <= idx < len(self.status):
            self.status[idx] = _STEP_STATUS[event.type]
            detail = step_detail(event)
            if detail or event.type != "plan_step_start":
                self.detail[idx] = detail
            if self.status[idx] in _ENDED:
                self.ends += 1
                self.ended_at[idx] = self.ends
        if self.interactive:
            self._refresh(event)
        else:
            self._line(event)

    def substep(self, step_id: str, event: Any) -> None:
        """A call of an imported plan step's sub-agent (goals/plan_steps.py): a line under the
        step, or the step's row detail on a terminal, so the step's tools are seen running."""
        if not event.type.startswith("plan_step_") or not event.tool or event.type == "plan_step_queued":
            return
        status = _STEP_STATUS.get(event.type, event.type.removeprefix("plan_step_"))
        if self.interactive:
            if step_id in self.ids:
                self.detail[self.ids.index(step_id)] = f"{event.tool}: {status}"
                self._refresh(event)
        else:
            self._say(f"[{step_id}] > {event.tool}: {status}")

    def done(self) -> int:
        return sum(1 for s in self.status if s in _ENDED)

    def summary(self) -> str:
        """``3/10 done, 2 running, 1 failed · 4.2 s``."""
        parts = [f"{self.done()}/{len(self.status)} done"]
        running = sum(1 for s in self.status if s in ("running", "retrying"))
        if running:
            parts.append(f"{running} running")
        failed = self.status.count("failed")
        if failed:
            parts.append(f"{failed} failed")
        if self.outputs_ready:
            parts.append(f"outputs final, waiting for fire-and-forget {', '.join(self.outputs_ready[:3])}"
                         + (" ..." if len(self.outputs_ready) > 3 else ""))
        return f"{', '.join(parts)} · {self.clock() - self.started:.1f} s"

    def visible_rows(self, capacity: int) -> tuple[list[int], int]:
        """The calls shown when only ``capacity`` rows fit, in plan order, and how many are left
        out: every running call first, then failures, the next pending calls, the latest ends."""
        n = len(self.status)
        if n <= capacity:
            return list(range(n)), 0
        room = max(capacity - 1, 1)  # one row says how many are left out

        def want(i: int) -> tuple:
            s = self.status[i]
            return _KEEP.get(s, 3), (i if s == "pending" else -self.ended_at[i])

        shown = sorted(sorted(range(n), key=want)[:room])
        return shown, n - len(shown)

    # -- output ------------------------------------------------------------------------------

    def _say(self, line: str) -> None:
        # ids, tool names, previews of results and errors come from the plan and the tools:
        # their control and bidi characters are shown escaped, never sent to the terminal
        print(visible(line), file=self.stream)

    def _line(self, event: Any) -> None:
        if event.type == "outputs_ready":
            ids = self.outputs_ready or []
            named = ", ".join(f"{c} ({self.tools[self.ids.index(c)]})" if c in self.ids else c for c in ids[:5])
            more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
            self._say(f"every call with an output has ended; waiting for fire-and-forget call(s) {named}{more} "
                  f"(Ctrl-C cancels them)")
        elif event.type == "plan_resumed":  # (sophon-dsl resume: restored calls send no events)
            d = event.data or {}
            items = d.get("restored_items") or 0
            of = f" ({items} of them map item calls)" if items else ""
            self._say(f"resuming run {d.get('run_id')}: {d.get('restored', 0)} call(s) restored from the store{of}, "
                  f"{d.get('in_doubt', 0)} in doubt")
        elif event.type == "plan_step_unknown" and event.step_index is not None:
            i = event.step_index
            if 0 <= i < len(self.status):
                self._say(f"[{self.ids[i]}] {self.tools[i]}: in doubt ({event.reason}): {event.status}")
        elif event.type.startswith("plan_step_") and event.step_index is not None:
            i = event.step_index
            if not 0 <= i < len(self.status):
                return
            count = f" ({self.done()}/{len(self.status)}, {self.clock() - self.started:.1f} s)" \
                if self.status[i] in _ENDED else ""
            extra = f"  {self.detail[i]}" if self.detail[i] else ""
            self._say(f"[{self.ids[i]}] {self.tools[i]}: {self.status[i]}{count}{extra}")
        elif event.type.startswith("approval_"):
            self._say(f"approval: {event.type.removeprefix('approval_')}"
                  + (f" ({event.reason})" if event.reason else ""))
        elif event.type == "provider_failover":
            self._say(f"provider: {event.reason}")

    def _rows(self) -> int:
        if self.height is not None:
            return self.height
        live = self.live
        console = getattr(live, "console", None)
        return console.size.height if console is not None else 24

    def render(self) -> Any:
        """The summary line over the table of the calls that fit."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        shown, hidden = self.visible_rows(max(self._rows() - _CHROME_ROWS, 3))
        table = Table(box=None, show_header=True, header_style="bold")
        table.add_column("call")
        table.add_column("tool")
        table.add_column("status")
        table.add_column("detail", overflow="ellipsis", no_wrap=True, max_width=60)
        for i in shown:
            status = self.status[i]
            # Text cells, not markup: a result such as "[/INST]" or "[bold]" is shown as written
            # (as markup it was a MarkupError that ended the view, or restyled the row)
            table.add_row(Text(visible(self.ids[i])), Text(visible(self.tools[i])),
                          Text(status, style=_STYLE.get(status, "")), Text(visible(self.detail[i])))
        if hidden:
            left = [self.status[i] for i in set(range(len(self.status))) - set(shown)]
            counts = ", ".join(f"{left.count(s)} {s}" for s in sorted(set(left)))
            table.add_row("…", f"{hidden} more", counts, "")
        return Group(Text(self.summary(), style="bold"), table)

    def _refresh(self, event: Any) -> None:
        from rich.console import Console
        from rich.live import Live

        if event.type == "plan_start" and self.live is None:
            # get_renderable: the elapsed time moves on between events too
            self.live = Live(console=Console(file=self.stream), refresh_per_second=8, transient=False,
                             get_renderable=self.render)
            self.live.start()
        elif self.live is not None:
            self.live.refresh()
        if event.type in ("plan_complete", "plan_failed") and self.live is not None:
            self.live.stop()
            self.live = None
        elif event.type.startswith("approval_") and event.type != "approval_requested":
            self._say(f"approval: {event.type.removeprefix('approval_')}")
        elif event.type == "provider_failover":
            self._say(f"provider: {event.reason}")

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
