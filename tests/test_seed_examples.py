"""Every JSON example of seed 004 (saved verbatim in examples/seed004/) loads cleanly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sophon_dsl.model import Mode, Reference
from sophon_dsl.syntax.doc_printer import dump_json, dump_yaml
from sophon_dsl.syntax.documents import document_to_plan
from sophon_dsl.syntax.json_source import parse_json
from sophon_dsl.syntax.yaml_source import parse_yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples" / "seed004").glob("*.json"))
SEED = Path("/work/shared/seeds/004_470c1612c950e3a8.txt")


def load_file(path: Path):
    text = path.read_text(encoding="utf-8")
    node, diags = parse_json(text, str(path))
    plan, more = document_to_plan(node, str(path), text, "json")
    return plan, diags + more


def test_there_are_eleven_examples():
    assert len(EXAMPLES) == 11


@pytest.mark.skipif(not SEED.exists(), reason="seed text not available")
def test_examples_are_verbatim_copies_of_the_seed():
    blocks = re.findall(r"```json\n(.*?)```", SEED.read_text(encoding="utf-8"), re.S)
    assert [p.read_text(encoding="utf-8") for p in EXAMPLES] == blocks


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_loads_without_diagnostics(path):
    plan, diags = load_file(path)
    assert diags == [], [str(d) for d in diags]
    # and survives a round trip through both document printers
    back, d2 = document_to_plan(parse_json(dump_json(plan))[0])
    assert d2 == [] and back == plan
    back, d3 = document_to_plan(parse_yaml(dump_yaml(plan))[0], form="yaml")
    assert d3 == [] and back == plan


def by_name(fragment: str):
    (path,) = [p for p in EXAMPLES if fragment in p.stem]
    plan, diags = load_file(path)
    assert diags == []
    return plan


def test_plan_two_calls_wiring():
    plan = by_name("plan_two_calls")
    fetch, summarize = plan.calls
    assert fetch.output.paths == (Reference("state", ("userProfileData",)),)
    assert summarize.param("profile").value == Reference("state", ("userProfileData",))
    assert plan.mode is Mode.EAGER and plan.call_ids() == ["c1", "c2"]


def test_request_with_leading_comment():
    plan = by_name("request_refund")
    assert plan.output_schema["properties"]["confirmationId"] == {"type": "string"}
    assert set(plan.input_schema["properties"]) == {"request", "customerId", "amount"}
    assert plan.input_schema["properties"]["amount"] == {"type": "number"}


def test_context_with_comment_keeps_branching_plan():
    plan = by_name("context_failure")
    pay, confirm = plan.calls
    assert pay.output.op == "||" and [r.text() for r in pay.output.paths] == ["†state.receipt", "†state.error"]
    assert confirm.param("receipt").value == Reference("state", ("receipt",))


def test_solution_with_inline_comments():
    plan = by_name("solution_schema_guided")
    assert [c.tool for c in plan.calls] == ["detectLanguage", "isEnglish", "translateText"]
    assert plan.output is None


def test_schema_guided_context():
    plan = by_name("context_schema_guided")
    assert plan.calls == ()
    assert set(plan.state_schema["properties"]) == {"language", "isEnglish", "translatedText"}
    assert plan.input_schema == {"type": "object", "properties": {"text": {"type": "string"}}}


def test_solutions_with_output():
    assert by_name("report_failure").output.get("status").value == "Failed"
    assert by_name("refund_with_output").output.get("confirmationId").value == "refund_xyz789"


# The warnings each example draws from the checker (its tools are not declared here, so
# E201 is expected and ignored).  The branching example 07 and the context 08 carrying it
# draw no W302: their unread `†state.error` is the catch alternative, read by the next turn
# (issue 10, item 19); the replanned solution 09 reads that error from the initial state.
# The solutions that read †input paths declare no input schema: W305 names the paths a run
# must be given (issue 25); the seed gives that input with the request.
EXPECTED_WARNINGS = {"09_solution_report_failure": ["W303"],
                     **{name: ["W305"] for name in (
                         "03_solution_refund_initial", "04_context_state_and_plan",
                         "05_solution_refund_with_output", "06_solution_pet_friendly_hotel",
                         "07_solution_branching_output_path", "11_solution_schema_guided_with_comments")}}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_warnings(path):
    from sophon_dsl import check

    plan, _ = load_file(path)
    found = sorted(d.code for d in check(plan, tools=[], stdlib=False) if d.code.startswith("W"))
    assert found == EXPECTED_WARNINGS.get(path.stem, [])
