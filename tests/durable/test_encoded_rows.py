"""What a durable run encodes per call, written directly (journal.record_text,
doc_printer.call_json): the same text as the encoder's, or the same error."""

from __future__ import annotations

import json

import pytest

from sophon_dsl.durable.base import dumps
from sophon_dsl.durable.journal import record_json, record_text
from sophon_dsl.model import Call, ListValue, Literal, ObjectValue, OutputMethod, OutputTarget, Param, Reference
from sophon_dsl.runtime.errors import ErrorInfo
from sophon_dsl.runtime.result import Attempt, new_record
from sophon_dsl.syntax.doc_printer import call_json, call_to_document

ODD = ['a"b', "back\\slash", "new\nline\ttab\x01\x1f", "é†😀", "\u2028\u2029\x85", "x" * 100_000, ""]


def _record(**fields):
    rec = new_record(fields.pop("id", "c1"), "work", fields.pop("index", 3))
    rec.status, rec.attempts = "succeeded", 1
    rec.started_at, rec.ended_at = 1795867031.9600456, 1795867032.0000001  # (kept as timestamps)
    for name, value in fields.items():
        setattr(rec, name, value)
    return rec


CASES = [
    ({}, ()),
    ({}, (0,)),
    ({}, (0, 2, 5)),
    ({"output": 7}, ()),
    ({"output": -1.5e-300}, ()),
    ({"output": True}, ()),
    ({"output": False}, ()),
    ({"output": "é†😀\n"}, ()),
    ({"output": "kept only when nothing was written"}, (1,)),
    ({"reason": "a \"reason\"\u2028", "branch": "b†", "caught": True, "status": "failed"}, ()),
    ({"attempts": 12, "index": 10**6, "status": "skipped", "started_at": None, "ended_at": None}, ()),
    # not the common record: the encoder writes it all (error, attempts, a container output)
    ({"error": ErrorInfo("Net.Down", "é"), "status": "failed"}, ()),
    ({"attempt_log": [Attempt(1, 1.5, 2.5, "failed", ErrorInfo("E", "x")), Attempt(2, 3.0, 4.0, "succeeded")]}, ()),
    ({"output": {"k": [1, "é", None]}}, ()),
    ({"output": [1, 2]}, ()),
] + [({"id": text, "output": text, "reason": text}, ()) for text in ODD]


@pytest.mark.parametrize("fields,written", CASES)
def test_a_record_s_text_is_the_encoder_s(fields, written):
    rec = _record(**fields)
    assert record_text(rec, written) == dumps(record_json(rec, written))


def test_times_already_formatted_are_written_as_text():
    rec = _record()
    text = rec.started_at  # (reading formats the kept timestamp: the record then holds the text)
    assert isinstance(text, str)
    assert record_text(rec, ()) == dumps(record_json(rec, ()))
    assert json.loads(record_text(rec, ()))["started"] == text


def test_a_value_the_store_cannot_hold_is_refused_as_before():
    with pytest.raises(ValueError):
        record_text(_record(output=float("nan")), ())
    with pytest.raises(TypeError):
        record_text(_record(output=object()), ())


def _call(*params, **attrs):
    return Call("work", tuple(Param(n, v) for n, v in params), **attrs)


OUT = OutputTarget((Reference("state", ("n",)),))
CALLS = [
    _call(("key", Literal(5)), ("inputs", ListValue(())), output=OUT),
    _call(("a", Literal(1.25)), ("b", Literal(True)), ("c", Literal(None)), ("d", Literal(False))),
    _call(("s", Literal("dagger † doubled, quote \" and \\ and é😀\x01")), ("_from", Literal(1))),
    _call(("l", ListValue((Literal(1), ListValue((Literal("x"),)), ObjectValue((("k", Literal(2)),)))))),
    _call(("r", Reference("state", ("a", 0))), ("big", Literal(10**40)), ("neg", Literal(-0.0))),
    _call(("dup", Literal(1)), ("other", Literal(2)), ("dup", Literal(3))),  # (a dict keeps the last)
    _call(("k", Literal(1)), output=OutputTarget((Reference("state", ("n",)),), method=OutputMethod.PUSH),
          id="x", timeout=2.5, after=("a",)),
    _call(output=OutputTarget((Reference("state", ("a",)), Reference("state", ("b",))))),
    _call(*[(f"p{k}", Literal(t)) for k, t in enumerate(ODD)]),
]


@pytest.mark.parametrize("call", CALLS)
def test_a_call_s_text_is_the_encoder_s(call):
    assert call_json(call, dumps) == dumps(call_to_document(call))


def test_a_call_holding_a_value_json_refuses_is_refused_as_before():
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError):
            call_json(_call(("x", Literal(bad))), dumps)
