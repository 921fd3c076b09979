"""Static checks as rules, one module per concern (actionlint's RuleBase style).

Each rule is a :class:`~sophon_dsl.checks.rule.Rule` subclass that declares the
codes it emits, its :class:`~sophon_dsl.checks.rule.Scope` (per call, or whole
plan) and a one-line docstring.  :data:`RULES` is the registry: adding a rule is
one module and one line here.  :class:`Checker` runs them over a whole plan or
over a plan arriving call by call (``docs/design.md``, "How to add a rule").
"""

from __future__ import annotations

from .after import UnknownAfter
from .branches import CollapsedBranches, CollectedBranches, UnreadBranches
from .checker import RuleRunner
from .containers import ContainerShapes
from .context import CheckContext
from .cycles import Cycles
from .ids import DuplicateIds
from .limits import CallLimit
from .maps import MapBodies
from .modes import Activities, InlineOutputs, MissingImplementations
from .outputs import OutputSchema
from .params import ToolParams
from .prescribed import PrescribedOutputs
from .readonly import ReadOnlyWrites
from .risk import RiskDowngrade
from .rule import Rule, Scope, describe
from .sources import OpenInputReads, ReadSources, UnknownKinds
from .statewrites import StateWrites
from .strings import ReferenceLikeText
from .types import ParamTypes
from .writers import ConcurrentWriters

__all__ = ["RULES", "CheckContext", "Checker", "Rule", "Scope", "deferred_codes", "describe_rules"]

#: Every rule, in the order they run (per-call rules first, then whole-plan rules).
RULES: tuple[type[Rule], ...] = (
    CallLimit,               # E305
    DuplicateIds,            # E303
    ReadOnlyWrites,          # E307
    UnknownAfter,            # E304
    ToolParams,              # E201 E202 E203
    PrescribedOutputs,       # E210 E211
    ParamTypes,              # E204 E205
    ReferenceLikeText,       # W101
    RiskDowngrade,           # W202
    OutputSchema,            # E208 (the plan's output)
    StateWrites,             # E308 E309
    UnknownKinds,            # E306
    InlineOutputs,           # E401 E402 E206
    Activities,              # E209
    CollapsedBranches,       # W401
    MissingImplementations,  # E207
    MapBodies,               # E502-E509 (a map's list and body)
    ReadSources,             # E301 W303 (whole plan)
    OpenInputReads,          # W305 (whole plan)
    Cycles,                  # E302 (whole plan)
    ConcurrentWriters,       # W301 (whole plan)
    ContainerShapes,         # W304 (whole plan)
    UnreadBranches,          # W302 (whole plan)
    CollectedBranches,       # N301 (whole plan)
)


class Checker(RuleRunner):
    """Runs :data:`RULES` (see :mod:`sophon_dsl.checks.checker` for the protocol)."""

    rules = RULES


def deferred_codes(rules: tuple[type[Rule], ...] = RULES) -> frozenset[str]:
    """The codes only whole-plan rules emit: what streaming checks at the end of a reply."""
    return frozenset(code for rule in rules if rule.scope is Scope.PLAN for code in rule.codes)


def describe_rules(rules: tuple[type[Rule], ...] = RULES) -> list[dict]:
    """Each rule's name, codes, scope and summary (its docstring's first line)."""
    return [describe(rule) for rule in rules]
