"""The live progress view of ``sophon-dsl run``, built on the runtime's events: on a
terminal a rich table shows each call going pending -> running -> done; elsewhere one
line per event goes to stderr."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["ProgressView"]

_STYLE = {
    "pending": "dim", "running": "yellow", "succeeded": "green", "failed": "red",
    "skipped": "magenta", "cancelled": "red", "retrying": "yellow",
}
_STEP_STATUS = {
    "plan_step_start": "running", "plan_step_complete": "succeeded", "plan_step_failed": "failed",
    "plan_step_skipped": "skipped", "plan_step_cancelled": "cancelled", "plan_step_retry": "retrying",
}


class ProgressView:
    """Shows each call's status as events arrive."""

    def __init__(self, plan: Any, ids: list[str], stream: Any = None):
        self.stream = stream or sys.stderr
        self.ids = ids
        self.tools = [c.tool for c in plan.calls]
        self.status = ["pending"] * len(ids)
        self.detail = [""] * len(ids)
        self.live = None
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, event: Any) -> None:
        idx = event.step_index
        if event.type in _STEP_STATUS and idx is not None and 0 <= idx < len(self.status):
            self.status[idx] = _STEP_STATUS[event.type]
            if event.type == "plan_step_failed" and event.error:
                self.detail[idx] = f"{event.error.get('error')}: {event.error.get('cause')}"
            elif event.type == "plan_step_skipped":
                self.detail[idx] = event.reason or ""
            elif event.type == "plan_step_retry":
                self.detail[idx] = f"attempt {event.attempt} failed; retrying"
            elif event.preview:
                self.detail[idx] = event.preview
        if self.interactive:
            self._refresh(event)
        else:
            self._line(event)

    def _line(self, event: Any) -> None:
        if event.type.startswith("plan_step_") and event.step_index is not None:
            i = event.step_index
            extra = f"  {self.detail[i]}" if self.detail[i] else ""
            print(f"[{self.ids[i]}] {self.tools[i]}: {self.status[i]}{extra}", file=self.stream)
        elif event.type.startswith("approval_"):
            print(f"approval: {event.type.removeprefix('approval_')}"
                  + (f" ({event.reason})" if event.reason else ""), file=self.stream)

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(box=None, show_header=True, header_style="bold")
        table.add_column("call")
        table.add_column("tool")
        table.add_column("status")
        table.add_column("detail", overflow="ellipsis", no_wrap=True, max_width=60)
        for cid, tool, status, detail in zip(self.ids, self.tools, self.status, self.detail):
            table.add_row(cid, tool, f"[{_STYLE.get(status, '')}]{status}[/]", detail)
        return table

    def _refresh(self, event: Any) -> None:
        from rich.console import Console
        from rich.live import Live

        if event.type == "plan_start" and self.live is None:
            self.live = Live(self._table(), console=Console(file=self.stream), refresh_per_second=12,
                             transient=False)
            self.live.start()
        elif self.live is not None:
            self.live.update(self._table())
        if event.type in ("plan_complete", "plan_failed") and self.live is not None:
            self.live.stop()
            self.live = None
        elif event.type.startswith("approval_") and event.type != "approval_requested":
            print(f"approval: {event.type.removeprefix('approval_')}", file=self.stream)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
