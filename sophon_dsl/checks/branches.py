"""W302, W401, N301: branching output paths (``†a || †b``) are read and kept; what reads of
collecting alternatives get."""

from __future__ import annotations

from ..model import Call, Mode, OutputMethod
from ..values import references
from .rule import Rule, Scope
from .schema import descend

__all__ = ["CollapsedBranches", "CollectedBranches", "UnreadBranches"]


class UnreadBranches(Rule):
    """W302: a ``||`` output alternative before the last (the catch) that nothing reads or declares."""

    codes = ("W302",)
    scope = Scope.PLAN

    def check_plan(self) -> None:
        ctx = self.ctx
        if not ctx.flow.writers.branching:
            return
        read_keys, read_below = ctx.flow.all_read_keys(references(ctx.output))
        schema = ctx.plan.state_schema
        for i, call in enumerate(ctx.calls):
            out = call.output
            if out is None or not out.is_branching:
                continue
            # the last alternative is the catch: a failure's error object lands there and is
            # the plan's recorded outcome, which the next turn reads (Acts 004, "Failure and
            # Replanning"), so only the alternatives before it need a reader in the plan
            for k, ref in enumerate(out.paths):
                if out.is_catch(k):
                    continue
                key = ref.key
                if key in read_below or any(key[:k] in read_keys for k in range(1, len(key) + 1)):
                    continue
                if (ref.kind == "state" and isinstance(schema, dict) and ref.path
                        and descend(schema, schema, ref.path) is not None):
                    continue
                ctx.diag("W302", f"branch alternative {ref.text()} of call {ctx.ids[i]} is never read; when "
                                 f"that branch is taken nothing reacts (add a call reading it, or declare it "
                                 f"in the state schema)", ref.span or out.span or ctx.call_span(i), call=i)


class CollapsedBranches(Rule):
    """W401: a latent call with a ``||`` output path in eager mode (one branch is taken)."""

    codes = ("W401",)

    def check_calls(self) -> None:
        ctx = self.ctx
        if ctx.flow.writers.branching and ctx.plan.mode is Mode.EAGER:
            super().check_calls()

    def check_call(self, i: int, call: Call) -> None:
        ctx = self.ctx
        out = call.output
        if out is None or not out.is_branching or ctx.plan.mode is not Mode.EAGER or call.activity is not None:
            return
        tab = ctx.sigs[i].tab
        if tab.spec is None or not tab.latent:
            return
        alts = out.text()
        if call.inline_output is not None:
            why = "its inline _output was produced on one branch only"
        else:
            why = "the model resolves the call while planning and picks one alternative"
        ctx.diag("W401", f"latent call {ctx.ids[i]} has a branching output path ({alts}) in eager mode; the "
                         f"branch collapses ({why}): write the single path taken, or use lazy mode to keep "
                         f"the branch", out.span or ctx.call_span(i), call=i)


class CollectedBranches(Rule):
    """N301: a read of an accumulating ``||`` alternative (``<<=``, ``+=``): [] when no writer takes it."""

    codes = ("N301",)
    scope = Scope.PLAN

    def check_plan(self) -> None:
        ctx = self.ctx
        flow = ctx.flow
        if not flow.writers.branching:
            return
        calls = ctx.calls
        refs, wss, offs = flow.read_refs, flow.read_writers, flow.read_offs
        told: set = set()
        reader = 0
        for slot, ws in enumerate(wss):
            while offs[reader + 1] <= slot:
                reader += 1
            ref = refs[slot]
            if not ws or (reader, ref.key) in told:
                continue
            if all(_collects(calls[j], ref) for j in ws):
                told.add((reader, ref.key))
                # the error-collecting pattern: say what the reader gets on the happy path
                ctx.diag("N301", f"call {ctx.ids[reader]} reads {ref.text()}, which "
                                 f"{'its writers collect' if len(ws) > 1 else f'{ctx.ids[ws[0]]} collects'} "
                                 f"only when they take that branch: when none does (every writer succeeds "
                                 f"another way) it reads as [] and the call still runs",
                         ref.span or ctx.call_span(reader), call=reader)


def _collects(call: Call, ref) -> bool:
    out = call.output
    return (out is not None and out.is_branching and out.method in (OutputMethod.PUSH, OutputMethod.CONCAT)
            and out.holds(ref))
