"""Issue 17, Medium 5: no header or body injection through RFC 2047 encoded words, and the
approver sees every argument of the call, in a form a terminal cannot hide."""

from __future__ import annotations

from email import message_from_bytes
from email.policy import default as default_policy
from typing import Any

import pytest

import sophon_dsl
from sophon_dsl.runtime.approval import prompt_approver
from stdlib_tools import StdlibConfig
from stdlib_tools.errors import ToolError

from stdlib_helpers import run, tools_by_name

INJECTIONS = [
    "=?utf-8?q?hi=0D=0AReply-To:_evil@x.example=0D=0A=0D=0Ainjected_body?=",
    "=?utf-8?b?aGkNClJlcGx5LVRvOiBldmlsQHguZXhhbXBsZQ==?=",           # base64 of hi\r\nReply-To: ...
    "Quarterly =?utf-8?q?report=0AContent-Type:_text/html?=",
    "=?utf-8?q?bell=07?=",
]


def _send(sink_port: int, **kw: Any) -> Any:
    config = StdlibConfig(smtp_host="127.0.0.1", smtp_port=sink_port, smtp_sender="bot@example.com")
    return run(tools_by_name(config, ["email"])["email.send"](to="team@example.com", body="real body", **kw))


@pytest.mark.parametrize("subject", INJECTIONS)
def test_encoded_words_that_decode_to_control_characters_are_refused(smtp_server, subject):
    sink, port = smtp_server
    with pytest.raises(ToolError) as info:
        _send(port, subject=subject)
    assert info.value.code == "Email.InvalidHeader"
    assert sink.envelopes == []


def test_a_harmless_encoded_word_still_sends_one_subject(smtp_server):
    sink, port = smtp_server
    _send(port, subject="=?utf-8?q?caf=C3=A9?= menu")
    msg = message_from_bytes(sink.envelopes[0].content, policy=default_policy)
    assert str(msg["Subject"]) == "café menu"
    assert msg["Reply-To"] is None and msg.get_content().strip() == "real body"


def test_the_approver_sees_every_argument_and_no_terminal_control(smtp_server):
    _, port = smtp_server
    shown: list[str] = []
    approver = prompt_approver(input_func=lambda prompt: "n", print_func=shown.append)
    plan = ('email.send(to="team@example.com", subject="Weekly \\u202eelif.exe\\u202c \\u001b[8mhidden", '
            'body="see attached")\n')
    config = StdlibConfig(smtp_host="127.0.0.1", smtp_port=port, smtp_sender="bot@example.com")
    result = sophon_dsl.run(plan, sophon_dsl.tools.as_registry(None, stdlib=config), approve=approver)
    text = "\n".join(shown)
    assert result.status == "rejected"
    assert "email.send" in text and 'to="team@example.com"' in text and "see attached" in text
    assert "\u202e" not in text and "\x1b" not in text
    assert "\\u202e" in text and "hidden" in text
