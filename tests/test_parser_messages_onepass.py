"""Every problem in one pass: loading errors do not hide the static checks (issue 12)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from sophon_dsl import compiler, loader
from sophon_dsl.cli import main
from sophon_dsl.fullcheck import check_loaded

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from test_conformance import _registry  # noqa: E402

TOOLS = '''
from sophon_dsl import tool

@tool
def search(query: str, limit: int = 5) -> list[str]:
    return []

@tool
def summarize(text: str) -> str:
    return text
'''

PLAN = '''\
@priority(high) †state.hits = search(query=$input.topic, limt=5)
summarize(text="5† each", style="short")
sumarize(text=$state.hits)
search(limit="5")
summarize(text=$state.nothing)
'''


def test_cli_reports_loading_errors_and_checks_together(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text(PLAN, encoding="utf-8")
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS, encoding="utf-8")
    assert main(["check", str(plan), "--tools", str(tools), "--json"]) == 1
    got = [(d["code"], d["line"]) for d in json.loads(capsys.readouterr().out)]
    # before: only the two loading errors (E104, E105); the seven others after fixing them
    # (W305: the plan reads †input paths and declares no input schema)
    assert got == [("E104", 1), ("W305", 1), ("E203", 1), ("E105", 2), ("E203", 2), ("E201", 3), ("E202", 4),
                   ("E204", 4), ("W303", 5)]


def test_a_finding_a_loading_error_would_make_a_guess_is_held_back():
    loaded = loader.parse('†state.a = search(query="a" limit=2)\nsummarize(text=†state.a)\n', "dsl")
    codes = [d.code for d in check_loaded(loaded, tools=_tools())]
    assert codes == ["E001"]  # the writer of †state.a did not load: no E301/W303 for the read


def _tools():
    return _registry({
        "search": {"input": {"type": "object", "properties": {"query": {"type": "string"}},
                             "required": ["query"]}},
        "summarize": {"input": {"type": "object", "properties": {"text": {"type": "string"}}}},
    })


def test_plans_that_load_cleanly_get_exactly_the_checks():
    """Byte-identical diagnostics for every plan of the corpus and the examples that loads."""
    seen = 0
    for path in sorted((ROOT / "spec" / "conformance").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for case in doc.get("cases") or []:
            loaded = loader.parse(case["plan"], case["form"], file="case")
            if not loaded.ok:
                continue
            registry = _registry({**(doc.get("tools") or {}), **(case.get("tools") or {})})
            kw = {"max_calls": case["max_calls"]} if "max_calls" in case else {}
            before = [*loaded.diagnostics, *(d.with_file("case") for d in
                                             compiler.check(loaded.plan, tools=registry, **kw))]
            after = check_loaded(loaded, tools=registry, **kw)
            assert [d.to_dict() for d in after] == [d.to_dict() for d in before], case["name"]
            seen += 1
    assert seen > 200
