"""Run events -> OpenTelemetry spans (imported only when tracing is on; see the package).

:class:`RunSpans` is an ordinary :class:`~sophon_dsl.runtime.events.EventBus` callback: the
bus calls it synchronously as each event is emitted, so span times are the events' own
times and no hook in the scheduler is needed.  One instance serves one run (a plan run, or
an agent run whose turns each run a plan under the plan id ``turn<N>``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from opentelemetry import context as otel_context

from .context import Remote, _register, _span_for, _unregister, call_context, parse_traceparent

from ..llm.provider import Message, ModelBound, Provider
from .protocols import PreparedRun, TracedRun

if TYPE_CHECKING:  # (named in annotations only; a run with a store imports the durable package)
    from ..durable.session import DurableRun
    from ..runtime.result import RunResult

__all__ = ["RunSpans", "LLMSpan"]

_NS = 1_000_000_000
_CALL_END = {"plan_step_complete": "succeeded", "plan_step_failed": "failed", "plan_step_skipped": "skipped",
             "plan_step_cancelled": "cancelled", "plan_step_unknown": None}
_CALL_OPEN = ("plan_step_queued", "plan_step_start", "approval_requested")
# a run's final statuses that are not errors (a goal's "complete"; "hitl" waits for a person)
_OK = ("succeeded", "waiting", "complete", "hitl")


def _ns(t: float | None) -> int | None:
    return int(t * _NS) if t is not None else None


def _text(value: Any, limit: int = 1000) -> str:
    s = value if isinstance(value, str) else str(value)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def map_parent(call_id: str) -> tuple[str, int] | None:
    """``("c3", 2)`` for the item call ``c3[2].act`` (nested: ``c1[0].m[3].x`` -> ``("c1[0].m", 3)``)."""
    k = call_id.rfind("[")
    if k <= 0:
        return None
    close = call_id.find("].", k)
    if close < 0:
        return None
    try:
        return call_id[:k], int(call_id[k + 1:close])
    except ValueError:
        return None


class _Call:
    __slots__ = ("span", "attempt", "tool", "item")

    def __init__(self, span: Any, attempt: int, tool: str | None, item: int | None) -> None:
        self.span, self.attempt, self.tool, self.item = span, attempt, tool, item


class RunSpans:
    """An event callback that records one run as a tree of spans (module docstring)."""

    def __init__(self, tracer: Any, *, handle: TracedRun | None = None, run_id: str = "",
                 prep: PreparedRun | None = None, durable: DurableRun | None = None, kind: str = "plan",
                 goal: str | None = None, durable_turns: bool = False) -> None:
        self.tracer = tracer
        self.handle: TracedRun | None = handle
        self.run_id = run_id
        self.kind = kind
        self.goal = goal
        self.durable: DurableRun | None = durable
        self.root: Any = None
        self.root_ctx: Any = None
        self.turns: dict[str, Any] = {}          # plan id ("turn3") -> (span, context)
        self.calls: dict[tuple[str, str], _Call] = {}
        self.counts: dict[str, int] = {}
        self.total = 0
        self.ended = False
        self._risk: dict[str, str] = {}
        self._tool_risk: Any = prep.registry.get if prep is not None else None
        # what current_call().run_id reads in an agent turn: "{run id}/t{n}" when durable, else ""
        self.durable_turns = durable_turns
        # where this run sits: inside a call of another run (a goal's step, a tool that runs a
        # plan), else in the context current when the run was set up (a goal's root, a span of
        # the embedding program); captured now, because events may come from other tasks
        self.parent_ctx = call_context() or otel_context.get_current()
        self.verdicts: dict[str, int] = {}
        if prep is not None:
            self._risks(prep)

    def _risks(self, prep: PreparedRun) -> None:
        from ..runtime.risk import effective_risk

        try:
            get = prep.registry.get
            for cid, call in zip(prep.ids, prep.plan.calls):
                self._risk[cid] = effective_risk(call, get(call.tool)).label
        except Exception:  # noqa: BLE001 - an attribute is not worth failing a run for
            pass

    # ------------------------------------------------------------------ the root

    def _parent_of_root(self) -> Any:
        """A resumed durable run continues the trace its first process started."""
        tp = None
        if self.durable is not None:
            from .store import stored_traceparent

            tp = stored_traceparent(self.durable)
        parsed = parse_traceparent(tp)
        if parsed is None:
            return self.parent_ctx
        trace_id, span_id, flags = parsed
        sc = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))
        return trace.set_span_in_context(NonRecordingSpan(sc))

    def _start_root(self, ev: Any) -> None:
        self.begin(ev.time, ev.plan_id, ev.goal)

    def begin(self, when: float | None = None, plan_id: str | None = None, goal: str | None = None) -> None:
        """Start the run's root span now (the first event does it otherwise): a goal run
        starts it before its planner's request, so that everything after is inside it."""
        if self.root is not None:
            return
        if self.handle is not None:
            self.run_id = self.handle.run_id or ""
            self.durable = self.handle.durable
        attrs = {"sophon.run.id": self.run_id, "sophon.run.kind": self.kind}
        if plan_id and self.kind == "plan":
            attrs["sophon.plan.id"] = plan_id
        goal = goal if self.kind == "plan" else self.goal
        if goal:
            attrs["sophon.goal"] = _text(goal)
        parent = self._parent_of_root()
        self.root = self.tracer.start_span("sophon.run", context=parent, kind=SpanKind.INTERNAL,
                                           attributes=attrs, start_time=_ns(when))
        self.root_ctx = trace.set_span_in_context(self.root)
        if self.durable is not None and parent is self.parent_ctx:
            from .store import store_traceparent

            store_traceparent(self.durable, self.root)

    def _end_root(self, ev: Any, status: str) -> None:
        root = self.root
        self.ended = True
        root.set_attribute("sophon.run.status", status)
        root.set_attribute("sophon.calls.total", self.total or ev.total_steps or 0)
        for name, n in sorted(self.counts.items()):
            root.set_attribute(f"sophon.calls.{name}", n)
        if ev.error:
            root.set_attribute("sophon.error.code", str(ev.error.get("error")))
            root.set_attribute("sophon.error.cause", _text(ev.error.get("cause") or ""))
        for name, n in sorted(self.verdicts.items()):
            root.set_attribute(f"sophon.goal.verdicts.{name}", n)
        if status not in _OK:
            root.set_status(Status(StatusCode.ERROR, _text(ev.reason or (ev.error or {}).get("cause") or status)))
        # what is still open (a run that stopped) ends with it
        for key, c in list(self.calls.items()):
            self._close(key, c, "cancelled" if status != "waiting" else "waiting", ev.time)
        for span, _ctx in self.turns.values():
            span.end(end_time=_ns(ev.time))
        self.turns.clear()
        root.end(end_time=_ns(ev.time))

    def finish(self, result: RunResult) -> None:
        """The run returned ``result``: end the root span if no terminal event did (a run left
        waiting for a person ends without one)."""
        if self.ended or self.root is None:
            return
        from ..runtime.events import make_event

        ev = make_event("plan_failed", "", None, None, len(result.calls), result.status,
                        error=result.error.to_json() if result.error is not None else None)
        self._end_root(ev, result.status)

    def abandon(self, status: str = "failed") -> None:
        """End the root span of a run that ended without its final event (an exception)."""
        if self.ended or self.root is None:
            return
        from ..runtime.events import make_event

        self._end_root(make_event("plan_failed", "", None, None, 0, status), status)

    # ------------------------------------------------------------------ events

    def __call__(self, ev: Any) -> None:
        if self.ended:
            return
        t = ev.type
        if self.root is None:
            self._start_root(ev)
        if t.startswith("agent_") or t.startswith("goal_"):
            self._agent_event(ev)
            return
        if t in ("plan_complete", "plan_failed"):
            if self.kind == "plan":
                self._end_root(ev, ev.status)
            else:
                turn = self.turns.get(ev.plan_id)
                if turn is not None:
                    turn[0].set_attribute("sophon.turn.status", ev.status)
            return
        if t == "plan_start":
            if self.kind == "plan":
                self.total = ev.total_steps
            return
        if ev.call_id is None:  # plan-level approval, resume, ...: an event on the run
            self._event(self._owner(ev), ev)
            return
        key = (ev.plan_id, ev.call_id)
        c = self.calls.get(key)
        if t in _CALL_END:
            if c is None:  # never started (skipped, cancelled before its start)
                c = self._open(ev, key, 1)
            if t == "plan_step_unknown":
                self._event(c.span, ev)
                return
            status = _CALL_END[t]
            self.counts[status] = self.counts.get(status, 0) + 1
            if t in ("plan_step_skipped", "plan_step_cancelled"):
                self._event(c.span, ev)
            self._close(key, c, status, ev.time, ev.error)
            return
        if t == "plan_step_retry":
            if c is None:
                c = self._open(ev, key, ev.attempt or 1)
            self._event(c.span, ev)
            self._close(key, c, "retrying", ev.time, ev.error)
            self._open(ev, key, (ev.attempt or c.attempt) + 1)
            return
        if c is None and t in _CALL_OPEN or t == "map_start":
            c = c or self._open(ev, key, 1)
        if c is not None:
            if t == "plan_step_start":
                c.span.add_event("started", timestamp=_ns(ev.time))
            else:
                self._event(c.span, ev)

    def _key_run(self, plan_id: str) -> str:
        if self.kind == "plan":
            return self.run_id
        if self.durable_turns and plan_id.startswith("turn"):
            return f"{self.run_id}/t{plan_id[4:]}"
        return ""

    def _owner(self, ev: Any) -> Any:
        turn = self.turns.get(ev.plan_id)
        return turn[0] if turn is not None else self.root

    def _event(self, span: Any, ev: Any) -> None:
        attrs: dict[str, Any] = {}
        if ev.status:
            attrs["sophon.status"] = ev.status
        if ev.reason:
            attrs["sophon.reason"] = _text(ev.reason)
        if ev.error:
            attrs["sophon.error.code"] = str(ev.error.get("error"))
            attrs["sophon.error.cause"] = _text(ev.error.get("cause") or "")
        if ev.attempt is not None:
            attrs["sophon.call.attempt"] = ev.attempt
        if ev.type == "map_start" and isinstance(ev.data, dict) and isinstance(ev.data.get("items"), int):
            attrs["sophon.map.items"] = ev.data["items"]
        span.add_event(ev.type, attributes=attrs, timestamp=_ns(ev.time))

    # ------------------------------------------------------------------ calls

    def _open(self, ev: Any, key: tuple[str, str], attempt: int) -> _Call:
        call_id = key[1]
        parent_ctx = None
        item = None
        mp = map_parent(call_id)
        if mp is not None:
            item = mp[1]
            owner = self.calls.get((key[0], mp[0]))
            if owner is not None:
                parent_ctx = trace.set_span_in_context(owner.span)
        if parent_ctx is None:
            turn = self.turns.get(ev.plan_id)
            parent_ctx = turn[1] if turn is not None else self.root_ctx
        tool = ev.tool or ""
        attrs: dict[str, Any] = {"sophon.call.id": call_id, "sophon.tool": tool, "sophon.call.attempt": attempt,
                                 "sophon.run.id": self.run_id}
        if item is not None:
            attrs["sophon.map.item"] = item
        risk = self._risk.get(call_id)
        if risk is None and self._tool_risk is not None:  # an item call: its tool's risk
            spec = self._tool_risk(tool)
            if spec is not None and spec.risk is not None:
                risk = spec.risk.label
        if risk is not None:
            attrs["sophon.call.risk"] = risk
        if ev.type == "plan_step_queued":
            attrs["sophon.call.queued"] = True
        span = self.tracer.start_span(f"sophon.call {tool}".rstrip(), context=parent_ctx, attributes=attrs,
                                      start_time=_ns(ev.time))
        c = _Call(span, attempt, tool, item)
        self.calls[key] = c
        _register(self._key_run(key[0]), call_id, span)
        return c

    def _close(self, key: tuple[str, str], c: _Call, status: str, when: float | None,
               error: dict | None = None) -> None:
        span = c.span
        span.set_attribute("sophon.call.status", status)
        if error:
            span.set_attribute("sophon.error.code", str(error.get("error")))
            cause = error.get("cause")
            if cause:
                span.set_attribute("sophon.error.cause", _text(cause))
        if status in ("failed", "retrying"):
            span.set_status(Status(StatusCode.ERROR, str((error or {}).get("error") or status)))
        elif status == "succeeded":
            span.set_status(Status(StatusCode.OK))
        if self.calls.get(key) is c:
            del self.calls[key]
        _unregister(self._key_run(key[0]), key[1], span)
        span.end(end_time=_ns(when))

    # ------------------------------------------------------------------ agent and goal runs

    def _agent_event(self, ev: Any) -> None:
        t = ev.type
        if t == "agent_turn_start":
            turn_no = ev.plan_id[4:] if ev.plan_id.startswith("turn") else ev.plan_id
            attrs = {"sophon.turn": int(turn_no) if turn_no.isdigit() else turn_no, "sophon.run.id": self.run_id}
            if ev.status == "replayed":
                attrs["sophon.turn.replayed"] = True
            span = self.tracer.start_span("sophon.turn", context=self.root_ctx, attributes=attrs,
                                          start_time=_ns(ev.time))
            self.turns[ev.plan_id] = (span, trace.set_span_in_context(span))
        elif t == "agent_turn_end":
            turn = self.turns.pop(ev.plan_id, None)
            if turn is not None:
                turn[0].set_attribute("sophon.turn.status", str(ev.status))
                turn[0].end(end_time=_ns(ev.time))
        elif t in ("agent_done", "goal_done"):
            self._end_root(ev, str(ev.status))
        elif t == "goal_step_verdict":
            # emitted inside the step's goal.step call: that call's span is the step's span
            self.verdicts[str(ev.status)] = self.verdicts.get(str(ev.status), 0) + 1
            step = _span_for(None, None)
            if step is None or isinstance(step, Remote):
                step = self.root
            else:
                step.set_attribute("sophon.goal.step", str(ev.call_id))
                step.set_attribute("sophon.goal.verdict", str(ev.status))
            self._event(step, ev)
        else:
            self._event(self._owner(ev), ev)

    def activate(self) -> Any:
        """Make the run's root span the current OpenTelemetry context of the calling task
        (the runs it starts, in this task or in tasks it creates, become its children);
        returns the token for :meth:`deactivate`."""
        return otel_context.attach(self.root_ctx) if self.root_ctx is not None else None

    def deactivate(self, token: Any) -> None:
        if token is not None:
            otel_context.detach(token)

    def current_context(self) -> Any:
        """The context LLM requests of the run are parented to: the open turn, else the run."""
        if self.turns:
            return next(reversed(self.turns.values()))[1]
        return self.root_ctx

    def llm_request(self, provider: Provider, model: str | None) -> "LLMSpan":
        """A GenAI span for one request of this run, a child of its open turn."""
        return LLMSpan(self.tracer, provider, model, context=self.current_context())


class LLMSpan:
    """One LLM request as a GenAI client span (OpenTelemetry semantic conventions): started
    when the request is sent, ended when its stream ends.  Providers stream text without
    usage counts, so the token counts are estimated from the characters sent and received
    (the planning budget's estimate) and ``sophon.usage.estimated`` says so."""

    def __init__(self, tracer: Any, provider: Provider, model: str | None, operation: str = "chat",
                 context: Any = None) -> None:
        self.system = _provider_name(provider)
        self.out_chars = 0
        self.ended = False
        attrs = {"gen_ai.operation.name": operation, "gen_ai.system": self.system,
                 "gen_ai.provider.name": self.system}
        model = model or (provider.model if isinstance(provider, ModelBound) else None)
        if isinstance(model, str) and model:
            attrs["gen_ai.request.model"] = model
        name = f"{operation} {model}" if isinstance(model, str) and model else operation
        self.span = tracer.start_span(name, context=context, kind=SpanKind.CLIENT, attributes=attrs)

    def delta(self, text: str) -> None:
        self.out_chars += len(text)

    def fail(self, exc: BaseException) -> None:
        self.span.set_attribute("error.type", str(getattr(exc, "error", None) or type(exc).__name__))
        self.span.set_status(Status(StatusCode.ERROR, _text(str(exc), 300)))

    def end(self, messages: Sequence[Message] = ()) -> None:
        if self.ended:
            return
        self.ended = True
        from ..planning.budget import CHARS_PER_TOKEN

        in_chars = sum(len(m.content or "") for m in messages or ())
        self.span.set_attribute("gen_ai.usage.input_tokens", -(-in_chars // CHARS_PER_TOKEN))
        self.span.set_attribute("gen_ai.usage.output_tokens", -(-self.out_chars // CHARS_PER_TOKEN))
        self.span.set_attribute("sophon.usage.estimated", True)
        self.span.end()


def _provider_name(provider: Provider) -> str:
    """The GenAI ``gen_ai.system`` value of a provider object (``openai``, ``anthropic``, ...)."""
    name = provider.name
    if isinstance(name, str) and name:
        return name.split(":", 1)[0].lower()
    cls = type(provider).__name__.lower()
    for known in ("openai", "anthropic", "scripted", "failover"):
        if known in cls:
            return known
    return cls.removesuffix("provider") or "unknown"
