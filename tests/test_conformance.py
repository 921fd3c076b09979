"""The conformance corpus: every case of every spec/conformance/*.yaml, one parametrized test.

Each YAML file holds ``description``, optional shared ``tools`` and a list of
``cases``.  A case gives a plan (``form``: dsl, json or yaml), optional
``tools`` merged over the file's, optional ``max_calls`` and
``require_executor``, and either
``valid: true`` or the exact multiset of expected error/warning
``diagnostics`` (``code`` plus optional ``line`` / ``column``; notes are
ignored).  ``xfail: reason`` marks a case the implementation is known to get
wrong; it must fail (strict).  See spec/README.md#conformance-corpus.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conformance_support import collect_cases

CORPUS = Path(__file__).resolve().parent.parent / "spec" / "conformance"
CASE_KEYS = {"name", "rule", "form", "plan", "tools", "max_calls", "require_executor", "require_implementations",
             "valid", "diagnostics", "xfail"}


CASES = collect_cases(CORPUS, "")


def _dummy(**kwargs):  # implementation of a non-latent tool; never run by the checker
    return None


def _registry(tools: dict):
    from sophon_dsl.model import Risk
    from sophon_dsl.tools import ToolRegistry, ToolSpec

    specs = []
    for name, decl in tools.items():
        decl = decl or {}
        specs.append(ToolSpec(
            name,
            decl.get("description", ""),
            decl.get("input"),
            decl.get("output"),
            Risk.parse(decl.get("risk", "none")),
            func=None if decl.get("latent", True) else _dummy,
        ))
    return ToolRegistry(specs)


def test_corpus_is_well_formed():
    names = Counter(p.id for p in CASES)
    assert not [n for n, k in names.items() if k > 1], "duplicate case names"
    for p in CASES:
        _, _, case = p.values
        assert set(case) <= CASE_KEYS, (p.id, set(case) - CASE_KEYS)
        assert case.get("form") in ("dsl", "json", "yaml"), p.id
        assert isinstance(case.get("plan"), str), p.id
        assert ("valid" in case) != ("diagnostics" in case), p.id
        assert case.get("rule"), p.id


@pytest.mark.parametrize("file_name, file_tools, case", CASES)
def test_conformance(file_name, file_tools, case):
    from sophon_dsl import loader
    from sophon_dsl.diagnostics import Severity, render_text
    from sophon_dsl.fullcheck import check_loaded

    tools = {**file_tools, **(case.get("tools") or {})}
    registry = _registry(tools)
    loaded = loader.parse(case["plan"], format=case["form"], file="case")
    kwargs = {"tools": registry}
    if "max_calls" in case:
        kwargs["max_calls"] = case["max_calls"]
    if case.get("require_executor"):  # no LLM executor available: latent calls are E206
        kwargs["require_executor"] = True
    if case.get("require_implementations"):  # about to run: explicit tools need code (E207)
        kwargs["require_implementations"] = True
    # loading errors do not hide the checks: every problem in one pass (issue 12)
    diags = check_loaded(loaded, **kwargs)
    got = [d for d in diags if d.severity is not Severity.NOTE]
    shown = render_text(got, case["plan"])

    if case.get("valid"):
        assert not got, f"expected a valid plan, got:\n{shown}"
        return
    expected = list(case["diagnostics"] or [])
    # Each expectation gives a code and optionally line / column and a part of the
    # message (``message``: a substring it must contain); a diagnostic
    # satisfies it when every given field matches.  Most specific first.
    expected.sort(key=lambda e: -(("line" in e) + ("column" in e)))
    unmatched = list(got)
    missing = []
    for e in expected:
        for d in unmatched:
            if d.code == e["code"] and e.get("line", d.line) == d.line \
                    and e.get("column", d.column) == d.column and e.get("message", "") in d.message:
                unmatched.remove(d)
                break
        else:
            missing.append(e)
    extra = [(d.code, d.line, d.column) for d in unmatched]
    assert not missing and not extra, (
        f"missing  {missing}\nextra    {extra}\n{shown}")
