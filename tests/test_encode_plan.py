"""syntax.doc_printer.encode_plan: the compact JSON of plan_to_document, built one call at a time."""

from __future__ import annotations

import glob
import os

import pytest
from hypothesis import given, settings

from sophon_dsl import load
from sophon_dsl.durable.base import dumps
from dataclasses import replace

from sophon_dsl.model import Call, InitialData, Literal, Plan
from sophon_dsl.syntax.doc_printer import _CALLS_MARK, encode_plan, plan_to_document

from strategies import plans, plans_with_maps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _example_plans() -> list[str]:
    """Every plan file under examples/ in any form (JSON and YAML files there are also inputs,
    tool declarations and scripted replies: only those that load as plans are taken)."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.*"), recursive=True)):
        if path.endswith((".plan", ".json", ".yaml", ".yml")):
            try:
                load(path)
            except Exception:  # noqa: BLE001 - not a plan
                continue
            found.append(path)
    return found


EXAMPLES = _example_plans()


@given(plans() | plans_with_maps())
@settings(max_examples=150, deadline=None)
def test_equals_the_whole_document_encoded(plan):
    assert encode_plan(plan, dumps) == dumps(plan_to_document(plan))
    # the same plan read from a context list (input and state messages before the plan)
    with_data = replace(plan, initial=InitialData(input={"q": "é"}, state={"n": 1}))
    assert encode_plan(with_data, dumps) == dumps(plan_to_document(with_data))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_examples(path):
    plan = load(path)
    assert encode_plan(plan, dumps) == dumps(plan_to_document(plan))


def test_a_plan_holding_the_mark_itself_is_encoded_the_plain_way():
    plan = Plan((Call("f", ()),), goal=_CALLS_MARK)
    assert encode_plan(plan, dumps) == dumps(plan_to_document(plan))
    plan = Plan((Call("f", ()),), output=Literal(_CALLS_MARK))
    assert encode_plan(plan, dumps) == dumps(plan_to_document(plan))
