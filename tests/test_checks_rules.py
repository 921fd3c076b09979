"""The rule registry: every rule declares its codes, scope and one-line summary; a new
rule is one class and one entry."""

from __future__ import annotations

from sophon_dsl import checks
from sophon_dsl.checks import Checker, Rule, Scope
from sophon_dsl.compiler import effective_registry
from sophon_dsl.diagnostics import CODES

from test_compiler import TOOLS, C, P


def test_every_rule_declares_codes_scope_and_one_line_summary():
    seen: dict[str, str] = {}
    for rule in checks.RULES:
        assert rule.codes and all(c in CODES for c in rule.codes), rule
        assert isinstance(rule.scope, Scope)
        doc = (rule.__doc__ or "").strip()
        assert doc and "\n" not in doc, rule
        for code in rule.codes:
            assert code not in seen, f"{code} emitted by {seen[code]} and {rule.__name__}"
            seen[code] = rule.__name__
    described = checks.describe_rules()
    assert [d["name"] for d in described] == [r.__name__ for r in checks.RULES]


def test_every_static_code_has_a_rule():
    streaming = {"E212"}  # refused while a reply streams in written order (runtime.feed), not a check
    loading = {"E501"}  # a malformed map: read with the source, like E1xx
    text = {"W101"}  # a warning about what strings say (issue 12): checked by a rule, not when read
    running = {"E310"}  # a run's input lacks what the plan reads (runtime.api.prepare), not a check
    notes = {"N301"}  # a note a rule gives (what a read of a collecting alternative gets)
    static = ({c for c in CODES if c[1] in "2345" and c[0] in "EW"} | text | notes) - streaming - loading - running
    assert static == {c for r in checks.RULES for c in r.codes}


class NoShouting(Rule):
    """W999: a tool name in capitals (an example rule)."""

    codes = ("W999",)

    def check_call(self, i, call):
        if call.tool.isupper():
            self.ctx.diag("W999", f"call {self.ctx.ids[i]} shouts", self.ctx.call_span(i), call=i)


def test_a_new_rule_runs_in_both_modes():
    plan = P(C("count", 1, {"n": 1}), C("LOUD", 2, {}))
    registry = effective_registry(plan, TOOLS)
    whole = Checker(plan, registry, rules=(NoShouting,))
    assert [(i, d.code) for i, d in whole.found()] == [(1, "W999")]
    header = P()
    streamed = Checker(header, registry, rules=(NoShouting,))
    assert streamed.add_call(plan.calls[0], "c1") == []
    assert [d.code for d in streamed.add_call(plan.calls[1], "c2")] == ["W999"]
    assert checks.deferred_codes((NoShouting,)) == frozenset()
