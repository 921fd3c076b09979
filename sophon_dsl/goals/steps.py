"""Planned steps: what the planner must return, checked strictly (seed 003).

A step is ``{task, success_criterion, expected_findings, depends_on, subagent_hint}``.
:func:`parse_steps` turns the planner's JSON reply into :class:`PlannedStep` values or
raises :class:`PlannerError`: there is no degraded fallback plan. Only the routing hint
is forgiving: it is normalised (aliases, close misspellings) or dropped, never a reason
to reject a plan.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import SophonError
from .replies import strict_json

__all__ = ["HINTS", "PlannedStep", "PlannerError", "normalize_hint", "parse_steps"]

# The sub-agent roles a step may be routed to (seed 003).
HINTS = ("researcher", "coder", "communicator", "browser")

# Roles models invent, mapped to the nearest valid one.
_ALIASES = {
    "analyst": "researcher", "research": "researcher", "investigator": "researcher",
    "searcher": "researcher", "scientist": "researcher",
    "developer": "coder", "architect": "coder", "engineer": "coder", "programmer": "coder",
    "code": "coder", "dev": "coder",
    "writer": "communicator", "editor": "communicator", "messenger": "communicator",
    "emailer": "communicator", "reporter": "communicator", "author": "communicator",
    "web": "browser", "navigator": "browser", "scraper": "browser", "crawler": "browser",
    "web_browser": "browser",
}

_SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
SNAKE_KEY = _SNAKE          # (the import of a JarvisCore step list applies the same rules: syntax/documents.py)
MIN_STEPS, MAX_STEPS = 3, 10


def same_text(a: str, b: str) -> bool:
    """Do two texts say the same, up to case and spacing (a criterion that repeats its task)?"""
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


class PlannerError(SophonError):
    """The planner's reply cannot be used: no JSON, no steps, a bad field, a bad count,
    an unknown dependency or a cycle. Planning is never retried blindly."""


@dataclass(frozen=True)
class PlannedStep:
    """One step. ``id`` is assigned by the goal loop (``s1``, ``s2``, ... across replans),
    ``depends_on`` holds step ids (earlier steps of this plan or completed ones)."""

    id: str
    task: str
    success_criterion: str
    expected_findings: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()
    subagent_hint: str | None = None
    raw_hint: str | None = field(default=None, compare=False)

    def to_json(self) -> dict:
        return {"id": self.id, "task": self.task, "success_criterion": self.success_criterion,
                "expected_findings": list(self.expected_findings), "depends_on": list(self.depends_on),
                "subagent_hint": self.subagent_hint}


def normalize_hint(hint: Any) -> str | None:
    """A valid role for ``hint``: itself, its alias, a close misspelling; otherwise None."""
    if not isinstance(hint, str):
        return None
    key = hint.strip().lower().replace("-", "_").replace(" ", "_")
    if not key:
        return None
    if key in HINTS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    close = difflib.get_close_matches(key, [*HINTS, *_ALIASES], n=1, cutoff=0.75)
    if close:
        return close[0] if close[0] in HINTS else _ALIASES[close[0]]
    return None


def _text(step: dict, key: str, where: str) -> str:
    value = step.get(key)
    if not isinstance(value, str) or not value.strip():
        got = "missing" if key not in step else f"{type(value).__name__} {value!r}"
        raise PlannerError(f"{where}: '{key}' must be a non-empty string ({got})")
    return value.strip()


def _findings(step: dict, where: str) -> tuple[str, ...]:
    value = step.get("expected_findings", [])
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise PlannerError(f"{where}: 'expected_findings' must be a list of snake_case keys")
    bad = [k for k in value if not _SNAKE.match(k)]
    if bad:
        raise PlannerError(f"{where}: expected_findings keys must be snake_case: {', '.join(map(repr, bad))}")
    return tuple(value)


def _dependencies(step: dict, where: str, position: int, ids: list[str], known: frozenset[str]) -> tuple[str, ...]:
    value = step.get("depends_on", [])
    if value is None:
        value = []
    if not isinstance(value, list):
        value = [value]
    out: list[str] = []
    for dep in value:
        if isinstance(dep, int) and not isinstance(dep, bool):
            if not 1 <= dep <= len(ids):
                raise PlannerError(f"{where}: depends_on {dep} is not a step number (1..{len(ids)})")
            target = ids[dep - 1]
        elif isinstance(dep, str) and (dep in ids or dep in known):
            target = dep
        elif isinstance(dep, str) and dep.strip().isdigit() and 1 <= int(dep) <= len(ids):
            target = ids[int(dep) - 1]
        else:
            raise PlannerError(f"{where}: depends_on names an unknown step {dep!r}")
        if target == ids[position]:
            raise PlannerError(f"{where}: a step cannot depend on itself")
        if target not in out:
            out.append(target)
    return tuple(out)


def _check_acyclic(steps: list[PlannedStep]) -> None:
    inside = {s.id: s for s in steps}
    state: dict[str, int] = {}   # 1 = on the path, 2 = done

    def visit(sid: str, path: list[str]) -> None:
        state[sid] = 1
        for dep in inside[sid].depends_on:
            if dep not in inside:
                continue
            if state.get(dep) == 1:
                cycle = path[path.index(dep):] + [dep] if dep in path else [sid, dep]
                raise PlannerError(f"the steps' dependencies form a cycle: {' -> '.join(cycle)}")
            if state.get(dep) is None:
                visit(dep, path + [dep])
        state[sid] = 2

    for s in steps:
        if s.id not in state:
            visit(s.id, [s.id])


def parse_steps(reply: str, *, first_number: int = 1, min_steps: int = 3, max_steps: int = 10,
                completed: frozenset[str] = frozenset()) -> list[PlannedStep]:
    """The steps of a planner reply (``{"steps": [...]}`` or a bare list), numbered from
    ``s{first_number}``; ``completed`` are ids of earlier steps a replan may depend on."""
    data = strict_json(reply, PlannerError, "planner")
    items = data.get("steps") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise PlannerError("the planner's reply holds no 'steps' array")
    if not min_steps <= len(items) <= max_steps:
        raise PlannerError(f"the plan has {len(items)} step(s); it must have {min_steps} to {max_steps}")
    ids = [f"s{first_number + i}" for i in range(len(items))]
    steps: list[PlannedStep] = []
    for i, item in enumerate(items):
        where = f"step {i + 1}"
        if not isinstance(item, dict):
            raise PlannerError(f"{where}: a step must be an object, not {type(item).__name__}")
        task = _text(item, "task", where)
        criterion = _text(item, "success_criterion", where)
        if " ".join(criterion.lower().split()) == " ".join(task.lower().split()):
            raise PlannerError(f"{where}: the success_criterion repeats the task; it must say how to "
                               "tell that the task is done")
        raw_hint = item.get("subagent_hint")
        steps.append(PlannedStep(ids[i], task, criterion, _findings(item, where),
                                 _dependencies(item, where, i, ids, completed), normalize_hint(raw_hint),
                                 raw_hint if isinstance(raw_hint, str) else None))
    _check_acyclic(steps)
    return steps
