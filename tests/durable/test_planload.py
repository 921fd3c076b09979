"""The stored plan's short road (durable/planload.py) reads the same plan as the document
reader, for every plan shape the printer writes (hypothesis plans, the examples, the kill
test's plan), and leaves what it does not know to the reader."""

from __future__ import annotations

import glob
import json
import os
import sys

import pytest
from hypothesis import given, settings

from sophon_dsl.durable import planload
from sophon_dsl.durable.base import dumps
from sophon_dsl.loader import loads
from sophon_dsl.syntax.doc_printer import plan_to_document
from sophon_dsl.syntax.documents import document_to_plan

from .plans import seeded_plan

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from strategies import plans, plans_with_maps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def _reader(text: str):
    plan, diagnostics = document_to_plan(planload._node(json.loads(text), "$"), source=text, form="json")
    assert not [d for d in diagnostics if d.is_error]
    return plan


def _same(plan) -> str:
    text = dumps(plan_to_document(plan))
    fast, slow = planload.load_stored_plan(text), _reader(text)
    assert fast == slow
    assert repr(fast) == repr(slow)
    assert [c.attr_spans for c in fast.calls] == [c.attr_spans for c in slow.calls]
    assert fast.source == text and fast.form == "json"
    return text


@settings(max_examples=150, deadline=None)
@given(plans(max_calls=6))
def test_short_road_reads_what_the_reader_reads(plan):
    _same(plan)


@settings(max_examples=40, deadline=None)
@given(plans_with_maps())
def test_maps_go_the_readers_road(plan):
    _same(plan)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.plan"), recursive=True)))
def test_examples(path):
    with open(path, encoding="utf-8") as f:
        _same(loads(f.read(), "dsl"))


def test_the_kill_tests_plan_takes_the_short_road():
    text = _same(loads(seeded_plan(7), "dsl"))
    assert planload._read(json.loads(text), text).calls  # no _Unusual: the short road read it
