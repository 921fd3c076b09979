"""The shared value-tree visitor (sophon_dsl.values) and the walks built on it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings

from sophon_dsl.instances import map_references as instances_map_references
from sophon_dsl.model import Literal, Reference, Template, iter_references, value_to_json
from sophon_dsl.refs import json_to_value
from sophon_dsl.values import (NotLiteral, ValueVisitor, fold, has_references, literal_json, map_references,
                               references)

from strategies import values

TREE = json_to_value({"a": ["†state.x", 1, {"b": "hi †input.n"}], "c": "†state.y || †data.z", "d": None})


def test_references_in_source_order():
    assert [r.text() for r in references(TREE)] == ["†state.x", "†input.n", "†state.y", "†data.z"]
    assert list(iter_references(TREE)) == list(references(TREE))
    assert list(references(None)) == []
    assert has_references(TREE) and not has_references(json_to_value([1, {"a": "x"}]))


def test_literal_json_and_not_literal():
    assert literal_json(json_to_value({"a": [1, "x", None]})) == {"a": [1, "x", None]}
    with pytest.raises(NotLiteral):
        literal_json(TREE)
    assert issubclass(NotLiteral, TypeError)


def test_visitor_subclass_resolves_references():
    class Resolve(ValueVisitor):
        def reference(self, node):
            return "/".join(map(str, node.key))

        def expression(self, node):
            return self.visit(node.operands[0])

        def template(self, node):
            return "".join(p if isinstance(p, str) else self.visit(p) for p in node.parts)

    assert Resolve()(TREE) == {"a": ["state/x", 1, {"b": "hi input/n"}], "c": "state/y", "d": None}


def test_fold_with_functions():
    count = fold(TREE, reference=lambda r: 1, expression=lambda e: len(e.operands), template=lambda t: 1,
                 literal=lambda lit: 0, list=lambda xs: None)
    assert count == {"a": None, "c": 2, "d": 0}
    with pytest.raises(TypeError):
        fold(TREE, lists=lambda x: x)
    with pytest.raises(TypeError):
        fold(object())


def test_map_references_rewrites_every_reference_and_shares_literals():
    lit = Literal(3)
    assert map_references(lit, lambda r: r) is lit
    out = map_references(TREE, lambda r: replace(r, kind=r.kind.upper()))
    assert [r.kind for r in references(out)] == ["STATE", "INPUT", "STATE", "DATA"]
    assert instances_map_references is map_references


@settings(max_examples=200, deadline=None)
@given(values)
def test_source_json_round_trips(v):
    assert json_to_value(value_to_json(v)) == v


def test_template_to_source_braces_when_text_would_extend_the_reference():
    t = Template(("a ", Reference("state", ("x",)), ".txt"))
    assert value_to_json(t) == "a †{state.x}.txt"
    assert value_to_json(Literal("5 †")) == "5 ††"
