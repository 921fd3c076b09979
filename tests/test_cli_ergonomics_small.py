"""Issue 11 item 4: the small ones, each through the public API or a real server.

email.send's Date header; one E105 hint, not two; E204 says ``got null``, points at the
first bad item of a list; run-time input validation names every problem; ``load()``
speaks of the API, not of CLI flags, and raises FileNotFoundError; a ``typing.TypedDict``
error names the user's file and line; no pydantic warning for parameters named
``schema`` or ``dict``.
"""

from __future__ import annotations

import socket
import warnings
from email import message_from_bytes
from email.policy import default as default_policy
from email.utils import parsedate_to_datetime
from typing import Optional

import pytest

import sophon_dsl
from sophon_dsl import check, loads, run, tool
from sophon_dsl.loader import parse_file
from sophon_dsl.syntax.dsl_parser import parse_dsl


@tool
def numbers(ints: Optional[list[int]] = None, floats: list[float] = [], n: int = 0) -> int:  # noqa: B006
    return n


def e204(source: str) -> list:
    return [d for d in check(loads(source), tools=[numbers]) if d.code == "E204"]


# -- email.send ------------------------------------------------------------------------------------------


class _Sink:
    def __init__(self) -> None:
        self.envelopes: list = []

    async def handle_DATA(self, server, session, envelope):
        self.envelopes.append(envelope)
        return "250 Message accepted for delivery"


def test_email_send_sets_a_date_header():
    pytest.importorskip("aiosmtpd")
    from aiosmtpd.controller import Controller

    from stdlib_tools import StdlibConfig, source

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sink = _Sink()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        config = StdlibConfig(smtp_host="127.0.0.1", smtp_port=port, smtp_sender="agent@example.com")
        send = source(config, only=["email"]).get("email.send")
        result = run(loads('$state.r = email.send(to="team@example.com", subject="Hi", body="Hello")\n'),
                     tools=[send], approve=True)
        assert result.status == "succeeded", result.error
    finally:
        controller.stop()
    msg = message_from_bytes(sink.envelopes[0].content, policy=default_policy)
    assert msg["Date"] is not None
    assert parsedate_to_datetime(str(msg["Date"])).tzinfo is not None


# -- diagnostics ---------------------------------------------------------------------------------------


def test_e105_hint_is_given_once():
    _, diags = parse_dsl('f(x="a † b")\n')
    [d] = diags
    assert d.code == "E105" and d.message.count("'††'") == 1, d.message


def test_e204_says_got_null_once():
    [d] = e204("numbers(n=null)\n")
    assert d.message.endswith("expects integer, got null"), d.message
    [d] = e204("numbers(ints=[1, null])\n")
    assert "got null" in d.message and "null null" not in d.message


@pytest.mark.parametrize("source,where,column", [
    ('numbers(floats=[1.5, "a", "b"])\n', "floats[1]", 22),
    ('numbers(ints=["a", 2, "b"])\n', "ints[0]", 15),
    ('numbers(ints=[1, 2, 3, "x", "y", "z"])\n', "ints[3]", 24),
])
def test_e204_on_a_list_points_at_the_first_bad_item(source, where, column):
    [d] = e204(source)
    assert f"parameter '{where}'" in d.message and d.span.column == column, (d.message, d.span)


# -- run-time input validation -------------------------------------------------------------------------


@tool
def three(a: int, b: str, c: list[int]) -> int:
    return a


def test_input_validation_reports_every_problem():
    result = run(loads("$state.x = three(a=$input.a, b=$input.b, c=$input.c)\n"), tools=[three],
                 input={"a": "x", "b": 3, "c": [1, "y", "z"]})
    assert result.status == "failed"
    cause = result.calls[0].error.cause
    assert "parameter 'a': 'x' is not of type 'integer'" in cause
    assert "parameter 'b': 3 is not of type 'string'" in cause
    assert "'y' is not of type 'integer' (at /1)" in cause and "'z' is not of type 'integer' (at /2)" in cause


def test_whole_arguments_validation_reports_every_problem():
    from sophon_dsl.runtime.validation import schema_validator

    v = schema_validator({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                          "required": ["a", "b", "c"]})
    message = v.check({"a": "x", "b": 1})
    assert "'c' is a required property" in message
    assert "'x' is not of type 'integer' (at /a)" in message and "1 is not of type 'string' (at /b)" in message


# -- load() ---------------------------------------------------------------------------------------------


def test_load_of_a_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as exc:
        sophon_dsl.load(tmp_path / "nope.plan")
    assert exc.value.filename == str(tmp_path / "nope.plan")


def test_load_messages_do_not_mention_cli_flags(tmp_path):
    plan = tmp_path / "plan.txt"
    plan.write_text("f()\n", encoding="utf-8")
    with pytest.raises(sophon_dsl.SophonError) as exc:
        sophon_dsl.load(plan)
    assert "--" not in str(exc.value) and "format" in str(exc.value)
    [d] = parse_file(plan).diagnostics
    assert "--from" not in d.message


# -- tools --------------------------------------------------------------------------------------------


def test_typing_typeddict_works_before_python_3_12(tmp_path, monkeypatch):
    (tmp_path / "td_user_tools.py").write_text(
        "from typing import TypedDict\n"
        "from sophon_dsl import tool\n"
        "\n"
        "class Point(TypedDict):\n"
        "    x: int\n"
        "\n"
        "@tool\n"
        "def move(points: list[Point]) -> int:\n"
        "    return 0\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import td_user_tools

    # it used to be a TypeError naming the user's line (pydantic wants typing_extensions.TypedDict
    # before 3.12); sophon_dsl.typed_dicts now rebuilds the class as one
    points = td_user_tools.move.input_schema["properties"]["points"]
    assert points["type"] == "array" and "x" in str(td_user_tools.move.input_schema["$defs"]["Point"])


def test_no_pydantic_warning_for_parameters_named_schema_or_dict():
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @tool
        def validate(schema: dict, dict: str = "x", json: int = 0, copy: bool = False) -> bool:
            return True

        assert set(validate.input_schema["properties"]) == {"schema", "dict", "json", "copy"}
        result = run(loads('$state.ok = validate(schema={type: "object"}, dict="d")\n'), tools=[validate])
    assert result.status == "succeeded" and result.state["state"]["ok"] is True
