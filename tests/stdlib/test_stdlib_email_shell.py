"""email.send against a real SMTP server on 127.0.0.1 (aiosmtpd); shell.run confinement."""

from __future__ import annotations

import sys
import time
from email import message_from_bytes
from email.policy import default as default_policy

import pytest

from stdlib_tools import StdlibConfig, all_tools
from stdlib_tools.errors import ToolError

from stdlib_helpers import run, tools_by_name

aiosmtpd = pytest.importorskip("aiosmtpd")





def test_email_send_real_smtp(smtp_server):
    sink, port = smtp_server
    cfg = StdlibConfig(smtp_host="127.0.0.1", smtp_port=port, smtp_sender="Agent <agent@example.com>")
    t = tools_by_name(cfg, ["email"])
    assert t["email.send"].risk.label == "high"
    out = run(t["email.send"](to=["team@example.com", "Bob <bob@example.com>"], cc="boss@example.com",
                              bcc=["audit@example.com"], subject="Competitor sheet",
                              body="See attached numbers.", html="<p>See numbers.</p>"))
    assert out["accepted"] == ["team@example.com", "bob@example.com", "boss@example.com",
                               "audit@example.com"]
    assert out["refused"] == [] and out["message_id"].endswith("@example.com>")
    env = sink.envelopes[0]
    assert env.mail_from == "agent@example.com"
    assert sorted(env.rcpt_tos) == sorted(out["accepted"])
    msg = message_from_bytes(env.content, policy=default_policy)
    assert msg["Subject"] == "Competitor sheet" and msg["To"] == "team@example.com, bob@example.com"
    assert msg["Cc"] == "boss@example.com" and msg["Bcc"] is None  # bcc is not in the headers
    assert msg.get_body(("plain",)).get_content().strip() == "See attached numbers."
    assert "<p>See numbers.</p>" in msg.get_body(("html",)).get_content()


def test_email_partial_refusal(smtp_server):
    sink, port = smtp_server
    t = tools_by_name(StdlibConfig(smtp_host="127.0.0.1", smtp_port=port,
                                   smtp_sender="agent@example.com"), ["email"])
    out = run(t["email.send"](to=["ok@example.com", "x@refused.example"], subject="s", body="b"))
    assert out["accepted"] == ["ok@example.com"] and out["refused"] == ["x@refused.example"]
    with pytest.raises(ToolError) as err:
        run(t["email.send"](to="x@refused.example", subject="s", body="b"))
    assert err.value.code == "Email.RecipientsRefused"


def test_email_validation_and_config(smtp_server):
    _, port = smtp_server
    t = tools_by_name(StdlibConfig(smtp_host="127.0.0.1", smtp_port=port,
                                   smtp_sender="agent@example.com"), ["email"])
    for kwargs, code in (
        (dict(to="not-an-address", subject="s", body="b"), "Email.InvalidAddress"),
        (dict(to="a@example.com\r\nBcc: evil@example.com", subject="s", body="b"), "Email.InvalidAddress"),
        (dict(to="a@example.com", subject="hi\r\nBcc: evil@example.com", body="b"), "Email.InvalidHeader"),
        (dict(to=[], subject="s", body="b"), "Email.InvalidAddress"),
    ):
        with pytest.raises(ToolError) as err:
            run(t["email.send"](**kwargs))
        assert err.value.code == code
    unconfigured = tools_by_name(StdlibConfig(), ["email"])
    with pytest.raises(ToolError) as err:
        run(unconfigured["email.send"](to="a@example.com", subject="s", body="b"))
    assert err.value.code == "Email.NotConfigured"
    closed = tools_by_name(StdlibConfig(smtp_host="127.0.0.1", smtp_port=1, smtp_sender="a@example.com",
                                        smtp_timeout=2), ["email"])
    with pytest.raises(ToolError) as err:
        run(closed["email.send"](to="a@example.com", subject="s", body="b"))
    assert err.value.code == "Email.ConnectionError"


# --- shell ------------------------------------------------------------------------------------

def test_shell_is_off_by_default(sandbox):
    cfg = StdlibConfig(sandbox_root=sandbox)
    assert "shell.run" not in {t.name for t in all_tools(cfg)}
    with pytest.raises(ValueError):
        all_tools(cfg, only=["shell"])
    from stdlib_tools import shell
    spec = shell.build(cfg)[0]
    with pytest.raises(ToolError) as err:
        run(spec(command=["echo", "hi"]))
    assert err.value.code == "Shell.Disabled"


@pytest.fixture
def sh(sandbox):
    return tools_by_name(StdlibConfig(sandbox_root=sandbox, enable_shell=True), ["shell"])["shell.run"]


def test_shell_runs_confined(sh, sandbox):
    assert sh.risk.label == "critical"
    (sandbox / "sub").mkdir()
    out = run(sh(command=[sys.executable, "-c", "import os; print(os.getcwd())"], cwd="sub"))
    assert out["exit_code"] == 0 and out["stdout"].strip() == str((sandbox / "sub").resolve())
    # no shell: metacharacters are plain arguments
    out = run(sh(command="echo $HOME; rm -rf / | cat"))
    assert out["stdout"].strip() == "$HOME; rm -rf / | cat"
    out = run(sh(command=[sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read().upper()); "
                                                "sys.exit(3)"], stdin="abc"))
    assert out == {"exit_code": 3, "stdout": "ABC", "stderr": "", "timed_out": False, "truncated": False}
    for cwd in ("..", "/", "/tmp"):
        with pytest.raises(ToolError) as err:
            run(sh(command=["true"], cwd=cwd))
        assert err.value.code == "Files.OutsideSandbox"
    with pytest.raises(ToolError) as err:
        run(sh(command=["definitely-not-a-program-xyz"]))
    assert err.value.code == "Shell.NotFound"


def test_shell_timeout_kills(sh):
    start = time.monotonic()
    out = run(sh(command=[sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.3))
    assert out["timed_out"] is True and out["exit_code"] is None
    assert time.monotonic() - start < 10
