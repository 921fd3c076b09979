"""Approval gates: a pluggable async approver decides on risky plans (and calls).

An approver is any callable ``approver(request) -> decision`` (sync or async).
The decision may be an :class:`ApprovalDecision`, ``True``/``False``, the
strings ``"approve"``/``"yes"``/``"reject"``/``"no"``, or a
:class:`~sophon_dsl.model.Plan` (plan gate) / :class:`~sophon_dsl.model.Call`
(call gate) meaning "edit: run this instead".  No answer within the timeout
(default 600 s) rejects.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from ..diagnostics import visible
from ..errors import OptionError, OptionTypeError
from ..model import Call, Plan, Risk

__all__ = ["ApprovalDecision", "ApprovalRequest", "Approver", "PromptApprover", "auto_approver",
           "describe_rejected", "describe_request", "normalize_approver", "prompt_approver", "decide"]

Approver = Callable[["ApprovalRequest"], Any]


@dataclass(frozen=True)
class ApprovalRequest:
    """``kind`` is ``"plan"`` (whole plan, before anything runs) or ``"call"`` (one ready call).

    ``calls`` lists the risky calls as ``{"id", "tool", "risk", "index"}``; for a
    call gate ``call``/``call_id``/``args`` describe the call about to run.
    """

    kind: str
    plan: Plan
    calls: tuple[dict, ...] = ()
    call: Call | None = None
    call_id: str | None = None
    args: dict | None = None
    plan_id: str = ""
    max_risk: Risk = Risk.NONE


@dataclass(frozen=True)
class ApprovalDecision:
    action: str  # "approve" | "reject" | "edit"
    reason: str = ""
    plan: Plan | None = None
    call: Call | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def approve(cls, reason: str = "") -> "ApprovalDecision":
        return cls("approve", reason)

    @classmethod
    def reject(cls, reason: str = "rejected by the approver") -> "ApprovalDecision":
        return cls("reject", reason)

    @classmethod
    def edit(cls, edited: Plan | Call, reason: str = "edited by the approver") -> "ApprovalDecision":
        if isinstance(edited, Plan):
            return cls("edit", reason, plan=edited)
        return cls("edit", reason, call=edited)


def _coerce(answer: Any) -> ApprovalDecision:
    if isinstance(answer, ApprovalDecision):
        return answer
    if answer is True:
        return ApprovalDecision.approve()
    if answer is False or answer is None:
        return ApprovalDecision.reject()
    if isinstance(answer, (Plan, Call)):
        return ApprovalDecision.edit(answer)
    if isinstance(answer, str):
        low = answer.strip().lower()
        if low in ("approve", "approved", "yes", "y", "ok"):
            return ApprovalDecision.approve()
        if low in ("reject", "rejected", "no", "n"):
            return ApprovalDecision.reject()
    raise OptionTypeError(f"approver returned {answer!r}; expected ApprovalDecision, bool, 'approve'/'reject', "
                          "a Plan or a Call")


async def decide(approver: Approver | None, request: ApprovalRequest, timeout: float | None) -> ApprovalDecision:
    """Ask ``approver``; a missing approver, an exception or a timeout rejects."""
    if approver is None:
        return ApprovalDecision.reject(
            f"the {request.kind} needs approval (risk {request.max_risk.label}) and no approver is "
            "configured; pass approve=True / approve=<async callable> (CLI: --approve yes|ask)")

    async def ask() -> Any:
        out = approver(request)
        if inspect.isawaitable(out):
            out = await out
        return out

    try:
        answer = await asyncio.wait_for(ask(), timeout) if timeout else await ask()
    except asyncio.TimeoutError:
        return ApprovalDecision.reject(f"no answer within {timeout:g} s")
    except Exception as exc:  # noqa: BLE001
        return ApprovalDecision.reject(f"approver raised {type(exc).__name__}: {exc}")
    return _coerce(answer)


def auto_approver(answer: bool) -> Approver:
    async def approver(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve("auto-approved") if answer else ApprovalDecision.reject("auto-rejected")
    return approver


def normalize_approver(approve: Any) -> Approver | None:
    """``True``/``"yes"`` -> approve all, ``False``/``"no"`` -> reject all, callable -> itself,
    ``None`` -> no approver (risky plans are rejected), ``"ask"`` -> :func:`prompt_approver`."""
    if approve is None:
        return None
    if approve is True or (isinstance(approve, str) and approve.lower() in ("yes", "y", "approve")):
        return auto_approver(True)
    if approve is False or (isinstance(approve, str) and approve.lower() in ("no", "n", "reject")):
        return auto_approver(False)
    if isinstance(approve, str) and approve.lower() == "ask":
        return prompt_approver()
    if callable(approve):
        return approve
    raise OptionError(f"approve must be True/False, 'yes'/'no'/'ask' or a callable, not {approve!r}")


def prompt_approver(input_func: Callable[[str], str] | None = None,
                    print_func: Callable[[str], Any] | None = None) -> Approver:
    """An interactive approver: shows the goal and each risky call with its arguments on
    the terminal (never on standard output), then reads y/N (see :class:`PromptApprover`)."""
    return PromptApprover(input_func, print_func).ask


# what the prompt shows of a plan: enough to decide, bounded for plans of any size
MAX_SHOWN_CALLS = 20
MAX_ARGS_CHARS = 300


class PromptApprover:
    """Asks ``Approve? [y/N]`` at the terminal.

    Without ``input_func``/``print_func`` it talks to the terminal: standard error and
    standard input when both are terminals, else ``/dev/tty`` when it opens (``run plan >
    out.json`` keeps the prompt out of the result), else standard error and standard input.
    The answer is read without a thread the interpreter would wait for, so cancelling the
    run (Ctrl-C) ends the prompt at once; :meth:`interrupt` does the same from a signal
    handler: the pending prompt, and any later one, rejects.
    """

    def __init__(self, input_func: Callable[[str], str] | None = None,
                 print_func: Callable[[str], Any] | None = None) -> None:
        self._input = input_func
        self._print = print_func
        self._waiting: set[asyncio.Future] = set()  # one per prompt on screen (call gates run in parallel)
        self.interrupted = False

    def interrupt(self) -> None:
        self.interrupted = True
        for waiting in self._waiting:
            if not waiting.done():
                waiting.set_result(None)

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        if self.interrupted:
            return ApprovalDecision.reject("interrupted at the prompt")
        terminal = _Terminal.open() if self._input is None or self._print is None else None
        try:
            show = self._print or terminal.write  # type: ignore[union-attr]
            for line in describe_request(request):
                show(line)
            try:
                answer = await self._answer(terminal, "Approve? [y/N] ")
            except EOFError:
                return ApprovalDecision.reject("no answer at the prompt: standard input is closed "
                                               "(use --approve yes|no when not at a terminal)")
            if answer is None:
                show("")  # the terminal's cursor is still on the prompt line
                return ApprovalDecision.reject("interrupted at the prompt")
        finally:
            if terminal is not None:
                terminal.close()
        if answer.strip().lower() in ("y", "yes"):
            return ApprovalDecision.approve()
        return ApprovalDecision.reject("rejected at the prompt: " + describe_rejected(request))

    async def _answer(self, terminal: "_Terminal | None", prompt: str) -> str | None:
        """The line typed, or None when interrupted.  EOFError when the input is closed."""
        loop = asyncio.get_running_loop()
        waiting = loop.create_future()
        self._waiting.add(waiting)
        try:
            if self._input is not None:
                _in_daemon_thread(loop, waiting, self._input, prompt)
            else:
                assert terminal is not None
                terminal.write(prompt, end="")
                terminal.read_line(loop, waiting)
            return await waiting
        finally:
            self._waiting.discard(waiting)
            if terminal is not None:
                terminal.stop_reading(loop)


def describe_request(request: ApprovalRequest) -> list[str]:
    """The lines of the prompt: what needs approval, the goal, and each risky call with
    its tool, risk and arguments (previewed, bounded)."""
    goal = request.plan.goal
    if request.kind == "plan":
        name = f"Plan {request.plan_id}" if request.plan_id else "The plan"
        lines = [f"{name} needs approval (max risk {request.max_risk.label}):"]
    elif request.kind == "unknown":  # a durable run's call in doubt on resume
        lines = [f"Call {request.call_id} started before the run was interrupted; its outcome is unknown.",
                 "  Approve: run it again (same idempotency key). Reject: it fails with Call.OutcomeUnknown."]
    else:
        lines = [f"Call {request.call_id} needs approval (risk {request.max_risk.label}):"]
    if goal:
        lines.append(f"  goal: {bounded_text(goal)}")
    calls = request.calls
    for c in calls[:MAX_SHOWN_CALLS]:
        lines.append(f"  {c['id']}: {c['tool']} (risk {c['risk']})")
        if c.get("map"):  # a map body's call: it runs once per item
            n = c.get("items")
            count = "an item count known only when the map starts: it asks again then" if n is None \
                else f"{n:,} item(s)"
            lines.append(f"      for each item of map {c['map']} ({count})")
        if c.get("why"):  # a risk the data flow raised (runtime.risk.flow_risks)
            lines.append(f"      why: {c['why']}")
        args = shown_arguments(request, c)
        if args:
            lines.append(f"      {args}")
    if len(calls) > MAX_SHOWN_CALLS:
        lines.append(f"  ... and {len(calls) - MAX_SHOWN_CALLS} more risky call(s)")
    return lines


def shown_arguments(request: ApprovalRequest, entry: dict) -> str:
    """``name=value, ...`` of a risky call: the values read at run time for a call gate,
    the plan's own (references as written) for the plan gate."""
    import json

    if request.kind in ("call", "unknown") and request.args is not None:
        text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in request.args.items())
        return bounded_text(text)
    index = entry.get("index")
    calls = request.plan.calls
    if not isinstance(index, int) or not 0 <= index < len(calls):
        return ""
    from ..syntax.dsl_printer import format_value

    call = calls[index]
    for k in entry.get("body") or ():  # a call inside a map body (nested maps: one index per level)
        if call.map is None or not 0 <= k < len(call.map.body):
            return ""
        call = call.map.body[k]
    parts = []
    for param in call.params:
        parts.append(f"{param.name}={format_value(param.value, '†')}")
        if sum(map(len, parts)) > MAX_ARGS_CHARS:
            break
    return bounded_text(", ".join(parts))


# control characters (C0, DEL, C1) and bidirectional overrides / isolates: written to a
# terminal they can move the cursor, recolour or reorder text, and so hide an argument; the
# same rule as every terminal view of a plan (diagnostics.visible)
escape_hidden = visible


def bounded_text(text: str, limit: int = MAX_ARGS_CHARS) -> str:
    text = escape_hidden(text)
    text = " ".join(text.split())  # one line: a newline in a value must not break the prompt
    if len(text) <= limit:
        return text
    return text[:limit - 1] + f"… ({len(text) - limit + 1:,} more characters)"


def describe_rejected(request: ApprovalRequest) -> str:
    """The rejected calls, named: ``c5 (gmail.send)``, ..."""
    shown = [f"{c['id']} ({c['tool']})" for c in request.calls[:MAX_SHOWN_CALLS]]
    more = len(request.calls) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _in_daemon_thread(loop: asyncio.AbstractEventLoop, waiting: asyncio.Future,
                      func: Callable[[str], str], prompt: str) -> None:
    """``func(prompt)`` in a daemon thread: one blocked in it never holds the process at exit
    (``asyncio.to_thread`` would: the event loop waits for its threads when it closes)."""
    import threading

    def settle(result: Any, error: BaseException | None) -> None:
        if not waiting.done():
            if error is not None:
                waiting.set_exception(error)
            else:
                waiting.set_result(result)

    def work() -> None:
        try:
            result, error = func(prompt), None
        except Exception as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop closed: nobody waits for the answer any more
            pass

    threading.Thread(target=work, name="sophon-prompt", daemon=True).start()


class _Terminal:
    """Where the prompt is written and its answer read (see :class:`PromptApprover`)."""

    def __init__(self, out: Any, fd: int | None, tty: int | None = None) -> None:
        self.out = out  # a text stream, or None to write to ``tty``
        self.fd = fd
        self.tty = tty  # the descriptor of /dev/tty when it was opened here
        self._buffer = b""
        self._reading = False

    @classmethod
    def open(cls) -> "_Terminal":
        stdin, stderr = sys.stdin, sys.stderr
        if _isatty(stdin) and _isatty(stderr):
            return cls(stderr, stdin.fileno())
        try:
            tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError:  # no controlling terminal
            return cls(stderr, _fileno(stdin))
        return cls(None, tty, tty)

    def write(self, text: str, end: str = "\n") -> None:
        try:
            if self.out is None:
                os.write(self.tty, (text + end).encode("utf-8", "backslashreplace"))  # type: ignore[arg-type]
            else:
                self.out.write(text + end)
                self.out.flush()
        except (OSError, ValueError):  # a closed or broken stream: the answer still decides
            pass

    def read_line(self, loop: asyncio.AbstractEventLoop, waiting: asyncio.Future) -> None:
        """Settle ``waiting`` with the next line (EOFError at end of input) as it arrives:
        the event loop watches the descriptor, or a daemon thread reads it (files)."""
        if self.fd is None:
            waiting.set_exception(EOFError())
            return
        try:
            loop.add_reader(self.fd, self._on_readable, waiting)
            self._reading = True
        except (OSError, ValueError, NotImplementedError, RuntimeError):  # not pollable: a file
            _in_daemon_thread(loop, waiting, lambda _prompt: self._read_blocking(), "")

    def _on_readable(self, waiting: asyncio.Future) -> None:
        try:
            chunk = os.read(self.fd, 4096)  # type: ignore[arg-type]
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        line = self._take(chunk)
        if line is not None and not waiting.done():
            if line is EOFError:
                waiting.set_exception(EOFError())
            else:
                waiting.set_result(line)

    def _read_blocking(self) -> str:
        while True:
            line = self._take(os.read(self.fd, 4096))  # type: ignore[arg-type]
            if line is EOFError:
                raise EOFError
            if line is not None:
                return line  # type: ignore[return-value]

    def _take(self, chunk: bytes) -> Any:
        """A whole line once one is in, EOFError at the end of an empty input, else None."""
        if not chunk:
            if not self._buffer:
                return EOFError
            line, self._buffer = self._buffer, b""
            return line.decode("utf-8", "replace")
        self._buffer += chunk
        if b"\n" not in self._buffer:
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace")

    def stop_reading(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._reading:
            self._reading = False
            try:
                loop.remove_reader(self.fd)  # type: ignore[arg-type]
            except (OSError, ValueError, RuntimeError):
                pass

    def close(self) -> None:
        if self.tty is not None:
            try:
                os.close(self.tty)
            except OSError:
                pass
            self.tty = None


def _isatty(stream: Any) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _fileno(stream: Any) -> int | None:
    try:
        return stream.fileno() if stream is not None else None
    except (AttributeError, ValueError, OSError):
        return None
