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
from dataclasses import dataclass, field
from typing import Any, Callable

from ..model import Call, Plan, Risk

__all__ = ["ApprovalDecision", "ApprovalRequest", "Approver", "auto_approver", "normalize_approver",
           "prompt_approver", "decide"]

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
    raise TypeError(f"approver returned {answer!r}; expected ApprovalDecision, bool, 'approve'/'reject', "
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
    raise ValueError(f"approve must be True/False, 'yes'/'no'/'ask' or a callable, not {approve!r}")


def prompt_approver(input_func: Callable[[str], str] | None = None,
                    print_func: Callable[[str], Any] | None = None) -> Approver:
    """An interactive approver for terminals: shows the risky calls, reads y/n in a thread."""
    read = input_func or input
    show = print_func or print

    async def approver(request: ApprovalRequest) -> ApprovalDecision:
        if request.kind == "plan":
            show(f"Plan {request.plan_id or ''} needs approval (max risk {request.max_risk.label}):")
        else:
            show(f"Call {request.call_id} needs approval (risk {request.max_risk.label}):")
        for c in request.calls:
            show(f"  {c['id']}: {c['tool']} (risk {c['risk']})")
        try:
            answer = await asyncio.to_thread(read, "Approve? [y/N] ")
        except EOFError:
            return ApprovalDecision.reject("no answer at the prompt: standard input is closed "
                                           "(use --approve yes|no when not at a terminal)")
        return ApprovalDecision.approve() if answer.strip().lower() in ("y", "yes") else \
            ApprovalDecision.reject("rejected at the prompt")
    return approver
