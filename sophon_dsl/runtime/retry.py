"""Retry policies: which policy applies to a call, and the delay before each new attempt;
after the policy, at most one alternative call proposed by an :class:`Advisor`."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..model import Call, RetryPolicy
from .protocols import Advisor, FailedCall  # (declared with the other seams; named here too)

if TYPE_CHECKING:  # (only named in annotations)
    from .runstate import RunState

__all__ = ["Advisor", "FailedCall", "alternative_for", "output_fits", "policy_for", "retry_delay"]


def retry_delay(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Delay before attempt ``attempt + 1`` (``attempt`` >= 1 failed attempts so far)."""
    delay = max(policy.interval, 0.0) * (policy.backoff_rate ** (attempt - 1))
    if policy.max_delay is not None:
        delay = min(delay, policy.max_delay)
    if policy.jitter:
        delay = (rng or random).uniform(0, delay)
    return delay


def policy_for(call: Call, default: Any) -> RetryPolicy | None:
    """The call's own ``@retry``, else the run's ``retry`` option: one policy for every
    tool, or ``{tool name: policy}`` with ``"*"`` for the rest."""
    if call.retry is not None:
        return call.retry
    if default is None:
        return None
    if isinstance(default, RetryPolicy):
        return default
    if isinstance(default, dict):
        return default.get(call.tool) or default.get("*")
    return None


# ---------------------------------------------------------------------------
# One suggested alternative after the retry policy (issue 15 item 2, seeds 000/001).
# The runtime stays free of language models: an ``Advisor`` (RunOptions.advisor; the LLM one
# is sophon_dsl.planning.advisor.LLMAdvisor) proposes a call, the rules below decide whether
# it may run in place of the failed one.

NO_ADVICE_PREFIXES = ("Ref.", "Approval.", "Plan.")   # reference, approval and plan errors


def output_fits(alt: Any, orig: Any) -> bool:
    """The readers of a call were checked against its tool's output schema: an alternative
    tool fits them when it declares the same schema, or when the original declared none
    (its readers accept anything)."""
    want = orig.output_schema if orig is not None else None
    if not want:
        return True
    return alt is not None and alt.output_schema == want


def _target(out: Any) -> tuple | None:
    return None if out is None else (tuple(p.text() for p in out.paths), out.op, out.method)


def _text(call: Call) -> str:
    from ..syntax.dsl_printer import format_call

    return format_call(call, comments=False)


async def alternative_for(s: RunState, i: int, call: Call, err: Any) -> tuple[Call, dict, Any] | None:
    """Ask ``s.opts.advisor`` (``s``: the run's state, as the call runner has it) for an alternative to call
    ``i``, which failed with ``err`` after its retry policy; check it and, when it may run, return
    ``(call, args, inline)`` with the record and the call's spec switched to it.  The
    record's ``alternative`` says what was proposed and, when refused, why."""
    if err.error.startswith(NO_ADVICE_PREFIXES):
        return None
    rec = s.records[i]
    orig = s.specs[i]
    tools = tuple([orig] if orig is not None else []) + tuple(
        t for t in s.registry.values() if t.name != call.tool and output_fits(t, orig))
    try:
        alt = await s.opts.advisor.suggest(FailedCall(call, _text(call), err, tools))
    except Exception as exc:  # noqa: BLE001 - a failing advisor means no alternative
        rec.alternative = {"refused": f"the advisor failed: {type(exc).__name__}: {exc}", "after": err.to_json()}
        return None
    if alt is None:
        rec.alternative = {"refused": "NO_ALTERNATIVE", "after": err.to_json()}
        return None
    if alt.output is None and call.output is not None:
        alt = replace(alt, output=call.output)   # a bare call writes where the failed one did
    why = None
    spec = s.registry.get(alt.tool)
    if _target(alt.output) != _target(call.output):
        why = "it writes a different output path (the plan's wiring was checked against the original's)"
    elif spec is None:
        why = f"unknown tool {alt.tool!r}"
    elif not output_fits(spec, orig):
        why = f"{alt.tool}'s output schema does not fit the readers of {call.tool}'s output"
    rec.alternative = {"call": _text(alt), "tool": alt.tool, "after": err.to_json()}
    if why is None:
        why = await _riskier_needs_approval(s, i, call, alt, orig, spec)
    built = s.inputs.edited_args(i, alt) if why is None else None
    if why is None and built is None:
        why = "it reads values that are not available"
    if why is not None:
        rec.alternative["refused"] = why
        return None
    s.specs[i] = spec
    rec.tool = alt.tool
    s.emit("plan_step_retry", "retrying", i, attempt=rec.attempts, error=err.to_json(),
           reason=f"alternative: {rec.alternative['call']}", data={"alternative": rec.alternative})
    return alt, built[0], built[1]


async def _riskier_needs_approval(s: RunState, i: int, call: Call, alt: Call, orig: Any, spec: Any) -> str | None:
    """A riskier alternative goes through the approval gate whatever the run's settings."""
    from .approval import ApprovalRequest, decide
    from .risk import effective_risk

    risk = effective_risk(alt, spec)
    if risk <= effective_risk(call, orig):
        return None
    if s.opts.approver is None:
        return f"it is riskier ({risk.label}) and there is no approver"
    rec = s.records[i]
    req = ApprovalRequest("call", s.plan, ({"id": rec.id, "tool": alt.tool, "risk": risk.label, "index": i},),
                          alt, rec.id, None, s.plan_id, risk)
    s.emit("approval_requested", "pending", i, data=req)
    decision = await decide(s.opts.approver, req, s.opts.approval_timeout)
    if decision.action == "reject":
        s.emit("approval_rejected", "rejected", i, reason=decision.reason)
        return f"it is riskier ({risk.label}) and was not approved: {decision.reason}"
    s.emit("approval_granted", "approved", i, reason=decision.reason)
    return None
