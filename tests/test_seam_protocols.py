"""Every declared seam protocol is met by the components that plug into it (real objects, no
stand-ins): a protocol that loses a member, or a component that drops one, fails here before
a run reaches the attribute.  The protocols are listed in docs/design.md ("Seams are
declared"); tests/test_seams_declared.py keeps new probes out."""

from __future__ import annotations

import inspect
from typing import Protocol

import pytest

import stdlib_tools
from sophon_dsl.compiler import compile_plan
from sophon_dsl.goals.durable import GoalState, PlanView
from sophon_dsl.goals.plan_steps import StepAgents
from sophon_dsl.goals.runner import GoalRunner, _Loop, _PlanRun
from sophon_dsl.llm.agent import Agent
from sophon_dsl.llm.latent import LLMLatentExecutor
from sophon_dsl.llm.protocols import DelegateParent
from sophon_dsl.llm.provider import ModelBound, Provider, ReadyCheck, Wrapper
from sophon_dsl.llm.providers.openai import OpenAIProvider
from sophon_dsl.llm.providers.scripted import ScriptedProvider
from sophon_dsl.loader import loads, parse
from sophon_dsl.planning.budget import Budget, BudgetedProvider
from sophon_dsl.planning.context import ContextWindow, ContextWindowProvider
from sophon_dsl.runtime.api import RunHandle, prepare
from sophon_dsl.runtime.events import EventBus
from sophon_dsl.runtime.feed import FixedPlan, GrowingPlan, PlanFeed
from sophon_dsl.runtime.protocols import PlanHolder, ScopedLatentExecutor, SessionExecutor
from sophon_dsl.telemetry.protocols import PreparedRun, TracedRun
from sophon_dsl.tools import ToolRegistry, ToolSource, tool

PLAN = 'goal = "g"\n$state.x = echo(value="a")\n'


@tool
def echo(value: str) -> str:
    return value


def members(proto: type) -> set[str]:
    """The names a protocol declares: its annotations, methods and properties (its own and
    those of the protocols it extends)."""
    names: set[str] = set()
    for cls in proto.__mro__:
        if cls is Protocol or cls is object or Protocol not in cls.__mro__:
            continue
        names |= set(inspect.get_annotations(cls))
        names |= {n for n, v in vars(cls).items()
                  if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))}
    return names


def meets(obj: object, proto: type) -> list[str]:
    """The members of ``proto`` that ``obj`` lacks."""
    return sorted(m for m in members(proto) if not hasattr(obj, m))


def _agent() -> Agent:
    return Agent(ScriptedProvider(["return 1"]), [echo], stdlib=False)


def _cases():
    agent = _agent()
    plan = loads(PLAN)
    prep = prepare(plan, ToolRegistry([echo]))
    openai = OpenAIProvider("gpt-test", api_key="sk-test", base_url="http://127.0.0.1:9")
    steps = StepAgents(ScriptedProvider(["return 1"]), [echo], stdlib=False)
    loop = _Loop(GoalRunner(agent), "g", None)
    loop.last = _PlanRun([], 0)
    return [
        ("stdlib source", stdlib_tools.source(), ToolSource),
        ("scripted provider", ScriptedProvider(["return 1"]), Provider),
        ("openai provider", openai, Provider),
        ("openai provider", openai, ReadyCheck),
        ("openai provider", openai, ModelBound),
        ("budget wrapper", BudgetedProvider(openai, Budget()), Wrapper),
        ("context wrapper", ContextWindowProvider(openai, ContextWindow(8000)), Wrapper),
        ("agent", agent, DelegateParent),
        ("run handle", RunHandle(EventBus(), "p"), TracedRun),
        ("prepared plan", prep, PreparedRun),
        ("prepared plan", prep, PlanHolder),
        ("compiled plan", compile_plan(plan, ToolRegistry([echo])), PlanHolder),
        ("loaded plan", parse(PLAN), PlanHolder),
        ("fixed feed", FixedPlan(plan), PlanFeed),
        ("growing feed", GrowingPlan(plan), PlanFeed),
        ("LLM latent executor", LLMLatentExecutor(ScriptedProvider(["return 1"])), ScopedLatentExecutor),
        ("plan steps", steps, ScopedLatentExecutor),
        ("plan steps", steps, SessionExecutor),
        ("goal loop", loop, GoalState),
        ("goal's plan of steps", loop.last, PlanView),
    ]


@pytest.mark.parametrize("name, obj, proto", _cases(), ids=lambda v: v if isinstance(v, str) else None)
def test_each_component_meets_its_seam(name, obj, proto):
    assert members(proto), f"{proto.__name__} declares nothing"
    assert meets(obj, proto) == [], f"{name} lacks {meets(obj, proto)} of {proto.__name__}"


def test_a_plain_callable_is_still_a_fallback_and_no_tool_source():
    built = []

    def every_tool():
        built.append(1)
        return [echo]

    assert not isinstance(every_tool, ToolSource)
    registry = ToolRegistry([], fallback=every_tool)
    assert registry["echo"] is echo and built == [1]   # built whole, once


def test_a_tool_source_is_asked_for_one_tool_without_being_built():
    source = stdlib_tools.source()
    registry = ToolRegistry([echo], fallback=source)
    assert registry["datetime.now"].name == "datetime.now"
    assert registry.notes() == []   # echo replaces no standard tool; nothing else built to tell
