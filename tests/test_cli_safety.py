"""Issue 10, "data loss and hangs": what the CLI writes, where it prompts, and how it ends.

Every case runs the real console script in a subprocess (signals, terminals and the
interpreter's exit are what is under test); nothing is mocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sophon_dsl.loader import parse

CLI = [sys.executable, "-m", "sophon_dsl"]

TOOLS = """\
import time
from sophon_dsl import tool

@tool
def echo(text: str) -> str:
    return text

@tool(risk="high")
def send(to: str, body: str) -> dict:
    return {"sent": to}

@tool
def slow(seconds: float) -> str:
    time.sleep(seconds)
    return "done"
"""


def cli(*argv: str, cwd: Path, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *argv], cwd=cwd, input=stdin, capture_output=True, text=True,
                          encoding="utf-8", errors="backslashreplace", timeout=timeout)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    return tmp_path


# -- 1. lone surrogates are refused at load; writes are atomic and skipped when unchanged --------

SURROGATE_PLANS = {
    "s.plan": ('$state.x = echo(text="a\\ud800")\n', None),
    "q.plan": ("$state.x = echo(text='\\udc00')\n", None),
    "s.json": ('[{"_tool": "echo", "text": "a\\ud800"}]\n', "$[0].text"),
    "k.json": ('[{"_tool": "echo", "text": {"\\ud800": 1}}]\n', '$[0].text["\\ud800"]'),
    "s.yaml": ('- _tool: echo\n  text: "\\uD800"\n', "$[0].text"),
    "l.yaml": ('- _tool: echo\n  text: "\\U0000DFFF"\n', "$[0].text"),
}


@pytest.mark.parametrize("name", sorted(SURROGATE_PLANS))
def test_lone_surrogate_is_refused_by_every_command(ws: Path, name: str) -> None:
    text, path = SURROGATE_PLANS[name]
    plan = ws / name
    plan.write_text(text, encoding="utf-8")
    for argv in (["check", name, "--tools", "tools.py"], ["fmt", name], ["fmt", "-w", name],
                 ["run", name, "--tools", "tools.py", "--approve", "yes"]):
        done = cli(*argv, cwd=ws)
        assert done.returncode == 1, (argv, done.stderr)
        assert "Traceback" not in done.stderr and "UnicodeEncodeError" not in done.stderr, done.stderr
        shown = done.stdout if argv[0] == "check" else done.stderr  # check reports on stdout (issue 11)
        assert "error[E006]" in shown and "lone surrogate" in shown, shown
        assert f"{name}:1:" in shown or f"{name}:2:" in shown  # positioned
        if path is not None:
            assert f"(at {path})" in shown, shown
    assert plan.read_text(encoding="utf-8") == text  # fmt -w left the file as it was


def test_check_json_reports_e006_with_a_path(ws: Path) -> None:
    (ws / "s.json").write_text('[{"_tool": "echo", "text": "\\ud800"}]', encoding="utf-8")
    done = cli("check", "s.json", "--tools", "tools.py", "--json", cwd=ws)
    assert done.returncode == 1
    diags = json.loads(done.stdout)
    assert [(d["code"], d["path"], d["line"], d["column"]) for d in diags] == [("E006", "$[0].text", 1, 28)]


def test_surrogate_pairs_are_text_and_still_load() -> None:
    result = parse('$state.x = echo(text="\\ud83d\\ude00")\n')
    assert result.ok and result.plan.calls[0].params[0].value.value == "\U0001F600"
    assert parse('[{"_tool": "echo", "text": "\\ud83d\\ude00"}]', "json").ok
    assert parse('- _tool: echo\n  text: "\\ud83d\\ude00 \\\\ud800"\n', "yaml").ok  # an escaped backslash


def test_lone_surrogate_handed_over_by_a_program_is_refused() -> None:
    for text, form in (('$state.x = echo(text="a\ud800")\n', "dsl"), ('[{"_tool": "a\udc00"}]', "json"),
                       ('- _tool: "a\ud800"\n', "yaml")):
        result = parse(text, form)
        assert [d.code for d in result.diagnostics] == ["E006"], (form, result.diagnostics)
        assert result.diagnostics[0].span is not None


@pytest.mark.parametrize("flag,value,path", [("--input", '{"t": "\\ud800"}', "$.t"),
                                             ("--state", '{"k": {"a\\udc00": 1}}', '$.k["a\\udc00"]'),
                                             ("--input", '["ok", "\\udfff"]', "$[1]")])
def test_lone_surrogate_in_input_or_state_is_a_usage_error(ws: Path, flag: str, value: str, path: str) -> None:
    (ws / "in.plan").write_text("$state.x = echo(text=$input.t)\n", encoding="utf-8")
    done = cli("run", "in.plan", "--tools", "tools.py", flag, value, cwd=ws)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{flag}: error[E006] at {path}: a string holds a lone surrogate" in done.stderr


def test_fmt_w_leaves_a_formatted_file_untouched(ws: Path) -> None:
    plan = ws / "p.plan"
    plan.write_text('$state.x   =   echo(text="a")\n', encoding="utf-8")
    done = cli("fmt", "-w", "p.plan", cwd=ws)
    assert done.returncode == 0 and "wrote p.plan" in done.stderr
    formatted = plan.read_text(encoding="utf-8")
    assert formatted == '$state.x = echo(text="a")\n'
    os.utime(plan, (1_000_000_000, 1_000_000_000))
    before = os.stat(plan)
    done = cli("fmt", "-w", "p.plan", cwd=ws)
    assert done.returncode == 0 and "already formatted" in done.stderr, done.stderr
    after = os.stat(plan)
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)
    assert sorted(p.name for p in ws.iterdir()) == ["p.plan", "tools.py"]  # no temp file left


def test_fmt_w_replaces_the_file_atomically_and_keeps_its_mode(ws: Path) -> None:
    plan = ws / "p.plan"
    plan.write_text('$state.x   =   echo(text="a")\n', encoding="utf-8")
    os.chmod(plan, 0o640)
    inode = os.stat(plan).st_ino
    assert cli("fmt", "-w", "p.plan", cwd=ws).returncode == 0
    # a new file renamed over the old one (a reader never sees it half written)
    assert os.stat(plan).st_ino != inode
    assert os.stat(plan).st_mode & 0o777 == 0o640
    assert sorted(p.name for p in ws.iterdir()) == ["p.plan", "tools.py"]
    assert cli("fmt", "-w", "p.plan", "--to", "json", cwd=ws).returncode == 0
    assert json.loads((ws / "p.json").read_text(encoding="utf-8"))[0]["_tool"] == "echo"


# -- 2, 3. the approval prompt: on the terminal, informative, and Ctrl-C cancels at once -----

RISKY_PLAN = 'goal = "Email the team"\n$state.r = send(to="ana@example.com", body="hello\\nworld")\n'


def spawn_on_terminal(argv: list[str], cwd: Path, *, stdin_terminal: bool = True, stdout=None, stderr=None):
    """The CLI with a new pseudo-terminal as its controlling terminal; stdin, stdout and
    stderr are that terminal unless given.  Returns (process, master descriptor)."""
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()

    def take_terminal() -> None:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([*CLI, *argv], cwd=cwd, preexec_fn=take_terminal, pass_fds=(slave,),
                            stdin=slave if stdin_terminal else subprocess.PIPE,
                            stdout=slave if stdout is None else stdout,
                            stderr=slave if stderr is None else stderr)
    os.close(slave)
    return proc, master


def read_terminal(master: int, until: str, timeout: float = 30) -> str:
    import select
    import time

    seen, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        seen += chunk
        if until.encode() in seen:
            return seen.decode("utf-8", "replace")
    raise AssertionError(f"{until!r} never came on the terminal; it showed: {seen.decode('utf-8', 'replace')!r}")


def finish(proc: subprocess.Popen, master: int, timeout: float = 30) -> int:
    try:
        return proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_prompt_goes_to_the_terminal_and_only_the_result_to_stdout(ws: Path) -> None:
    (ws / "send.plan").write_text(RISKY_PLAN, encoding="utf-8")
    with open(ws / "out.json", "wb") as out:
        proc, master = spawn_on_terminal(["run", "send.plan", "--tools", "tools.py", "--json"], ws, stdout=out)
        shown = read_terminal(master, "Approve? [y/N]")
        os.write(master, b"y\n")
        assert finish(proc, master) == 0
    assert "goal: Email the team" in shown
    assert "c1: send (risk high)" in shown
    assert 'to="ana@example.com", body="hello\\nworld"' in shown  # the arguments, on one line
    result = json.loads((ws / "out.json").read_text(encoding="utf-8"))  # nothing but the result
    assert result["status"] == "succeeded"


def test_rejection_at_the_prompt_names_the_calls(ws: Path) -> None:
    (ws / "send.plan").write_text(RISKY_PLAN, encoding="utf-8")
    with open(ws / "out.json", "wb") as out:
        proc, master = spawn_on_terminal(["run", "send.plan", "--tools", "tools.py", "--json"], ws, stdout=out)
        read_terminal(master, "Approve? [y/N]")
        os.write(master, b"n\n")
        assert finish(proc, master) == 1
    result = json.loads((ws / "out.json").read_text(encoding="utf-8"))
    assert result["status"] == "rejected"
    assert result["error"]["cause"] == "rejected at the prompt: c1 (send)"


def test_prompt_previews_long_arguments_and_many_calls_bounded(ws: Path) -> None:
    lines = ['goal = "Many"'] + [f'$state.r{i} = send(to="t{i}", body="{"x" * 5000}")' for i in range(30)]
    (ws / "many.plan").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open(ws / "out.json", "wb") as out:
        proc, master = spawn_on_terminal(["run", "many.plan", "--tools", "tools.py", "--json"], ws, stdout=out)
        shown = read_terminal(master, "Approve? [y/N]")
        os.write(master, b"n\n")
        assert finish(proc, master) == 1
    assert "x" * 1000 not in shown and "…" in shown
    assert "c20: send (risk high)" in shown and "c21: send" not in shown
    assert "... and 10 more risky call(s)" in shown
    cause = json.loads((ws / "out.json").read_text(encoding="utf-8"))["error"]["cause"]
    assert cause.startswith("rejected at the prompt: c1 (send), c2 (send)") and cause.endswith("and 10 more")


def test_prompt_uses_the_controlling_terminal_when_stdin_is_not_one(ws: Path) -> None:
    (ws / "send.plan").write_text(RISKY_PLAN, encoding="utf-8")
    with open(ws / "out.json", "wb") as out, open(ws / "err.txt", "wb") as err:
        proc, master = spawn_on_terminal(["run", "send.plan", "--tools", "tools.py", "--json", "--approve", "ask"],
                                         ws, stdin_terminal=False, stdout=out, stderr=err)
        read_terminal(master, "Approve? [y/N]")  # on /dev/tty
        os.write(master, b"y\n")
        assert finish(proc, master) == 0
    assert json.loads((ws / "out.json").read_text(encoding="utf-8"))["status"] == "succeeded"
    assert "Approve?" not in (ws / "err.txt").read_text(encoding="utf-8")


def test_ctrl_c_at_the_prompt_cancels_at_once(ws: Path) -> None:
    (ws / "send.plan").write_text(RISKY_PLAN, encoding="utf-8")
    with open(ws / "out.json", "wb") as out:
        proc, master = spawn_on_terminal(["run", "send.plan", "--tools", "tools.py"], ws, stdout=out)
        read_terminal(master, "Approve? [y/N]")
        os.write(master, b"\x03")  # Ctrl-C: the terminal sends SIGINT
        shown = read_terminal(master, "plan cancelled")
        assert finish(proc, master, timeout=20) == 1
    assert "Traceback" not in shown
    assert json.loads((ws / "out.json").read_text(encoding="utf-8")) == {}  # the state, as after any run


# -- 4. a blocked sync tool never keeps the process alive after its run ends ---------------

SLEEP = 30  # the tool's sleep; every case must end long before it


def start_slow_run(ws: Path, *extra: str) -> subprocess.Popen:
    (ws / "slow.plan").write_text(f"$state.x = slow(seconds={SLEEP})\n", encoding="utf-8")
    return subprocess.Popen([*CLI, "run", "slow.plan", "--tools", "tools.py", *extra], cwd=ws,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(proc: subprocess.Popen, text: str) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        if text in line:
            return
    raise AssertionError(f"{text!r} never came on stderr")


def ended_within(proc: subprocess.Popen, seconds: float) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"the process was still alive {seconds} s later (the tool sleeps {SLEEP} s)") from None
    return out, err


@pytest.mark.parametrize("flag", [["--max-time", "1"], ["--timeout", "1"]])
def test_time_limits_end_the_process_without_waiting_for_the_tool(ws: Path, flag: list[str]) -> None:
    proc = start_slow_run(ws, *flag)
    out, err = ended_within(proc, SLEEP / 2)
    assert proc.returncode == 1
    assert "Traceback" not in err
    assert json.loads(out) == {}


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_cancels_prints_the_summary_and_ends_the_process(ws: Path, sig: str) -> None:
    import signal

    proc = start_slow_run(ws)
    wait_for_line(proc, "[c1] slow: running")
    proc.send_signal(getattr(signal, sig))
    out, err = ended_within(proc, SLEEP / 2)
    assert proc.returncode == 1, err
    assert "plan cancelled: 1 cancelled" in err and "Plan.Cancelled" in err
    assert "Traceback" not in err
    assert json.loads(out) == {}


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_while_the_run_is_being_started_still_ends_with_the_summary(ws: Path, sig: str) -> None:
    # `run` reads --input @FILE while it starts the run (after the plan and tools are
    # loaded): a FIFO holds it there, so the signal comes exactly in that window, where
    # asyncio.run's own handler used to cancel the command itself ("interrupted", 130, the
    # state never printed)
    import signal

    (ws / "two.plan").write_text(f"$state.a = echo(text=$input.t)\n$state.b = slow(seconds={SLEEP})\n",
                                 encoding="utf-8")
    os.mkfifo(ws / "in.json")
    proc = subprocess.Popen([*CLI, "run", "two.plan", "--tools", "tools.py", "--input", "@in.json", "--no-store"],
                            cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with open(ws / "in.json", "w", encoding="utf-8") as fifo:  # returns once `run` opened it to read
        proc.send_signal(getattr(signal, sig))
        fifo.write('{"t": "hi"}')
    out, err = ended_within(proc, SLEEP / 2)
    assert proc.returncode == 1, err
    assert "plan cancelled" in err and "Plan.Cancelled" in err and "interrupted" not in err
    assert "Traceback" not in err
    assert json.loads(out) == {}  # the state, as after any run (nothing ran: the signal came first)


def test_a_second_ctrl_c_prints_no_traceback(ws: Path) -> None:
    import signal
    import time

    proc = start_slow_run(ws)
    wait_for_line(proc, "[c1] slow: running")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    out, err = ended_within(proc, SLEEP / 2)
    assert "Traceback" not in err, err
    # 1: the run ended cancelled before the second Ctrl-C; 130: it came while the command was
    # still running; -SIGINT: it came during the interpreter's own shutdown, where Python has
    # put back the default action (death by SIGINT, which a shell reports as 130 too)
    assert proc.returncode in (1, 130, -signal.SIGINT)


def test_handle_cancel_ends_the_program_without_waiting_for_the_tool(ws: Path) -> None:
    script = f"""
import asyncio, time
from sophon_dsl import tool
from sophon_dsl.loader import loads
from sophon_dsl.runtime import start

@tool
def slow(seconds: float) -> str:
    time.sleep(seconds)
    return "done"

async def main():
    handle = start(loads("$state.x = slow(seconds={SLEEP})"), [slow])
    await asyncio.sleep(0.5)
    handle.cancel()
    print((await handle.result()).status, flush=True)

asyncio.run(main())
"""
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ws, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = ended_within(proc, SLEEP / 2)
    assert (proc.returncode, out.strip()) == (0, "cancelled"), err


def test_prompts_show_the_arguments_as_written_then_as_read() -> None:
    from sophon_dsl import tool
    from sophon_dsl.runtime import prompt_approver, run

    @tool
    def draft() -> str:
        return "the body"

    @tool(risk="high")
    def send(to: str, body: str) -> str:
        return to

    plan = parse('goal = "Mail"\n$state.b = draft()\n$state.m = send(to="team", body=$state.b)\n').plan
    shown: list[str] = []
    result = run(plan, [draft, send], approve=prompt_approver(lambda _p: "n", shown.append))
    assert result.status == "rejected" and result.error.cause == "rejected at the prompt: c2 (send)"
    assert "  goal: Mail" in shown and '      to="team", body=†state.b' in shown  # the plan gate

    shown.clear()
    prompt = prompt_approver(lambda _p: "n", shown.append)

    async def approver(request):
        return True if request.kind == "plan" else await prompt(request)

    result = run(plan, [draft, send], approve=approver, approve_calls=True)
    assert result.calls[1].error.cause == "rejected at the prompt: c2 (send)"
    assert shown[0].startswith("Call c2 needs approval (risk high)")
    assert '      to="team", body="the body"' in shown  # the call gate: the values read


def test_auto_rejection_names_the_risky_calls(ws: Path) -> None:
    (ws / "send.plan").write_text(RISKY_PLAN, encoding="utf-8")
    done = cli("run", "send.plan", "--tools", "tools.py", "--approve", "no", cwd=ws)
    assert done.returncode == 1
    assert "the plan has risky calls: c1 (send); review it and pass --approve yes" in done.stderr
