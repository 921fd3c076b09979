"""Issue 25 item 16, as read against the spec (language.md "Plan status"): a fire-and-forget
call (no output path) holds nothing that reads data, the run says when every output is final
(``outputs_ready``, naming the calls it still waits for), and it waits for them, so their side
effect is not lost and their failure still fails the run."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import sophon_dsl
from sophon_dsl import tool


def _tools(log: list):
    @tool(name="notify")
    async def notify(text: str, fail: bool = False) -> None:
        """A slow side effect."""
        log.append(("notify start", text))
        await asyncio.sleep(0.3)
        log.append(("notify end", text))
        if fail:
            raise RuntimeError("smtp down")

    @tool(name="produce")
    def produce(n: int) -> int:
        """Fast, with an output."""
        log.append(("produce", n))
        return n

    return [notify, produce]


PLAN = 'notify(text="start")\n†state.x = produce(n=1)\n†state.y = produce(n=†state.x)\n'


def test_outputs_ready_comes_before_the_fire_and_forget_end_and_the_run_waits_for_it():
    log: list = []
    events: list = []
    result = sophon_dsl.run(PLAN, _tools(log), on_event=lambda e: events.append((e.type, e.call_id, e.data)))
    assert result.status == "succeeded" and result.state == {"state": {"x": 1, "y": 1}}
    types = [t for t, _, _ in events]
    ready = types.index("outputs_ready")
    assert events[ready][2] == {"waiting_for": ["c1"]}
    c1_end = next(k for k, (t, cid, _) in enumerate(events) if t == "plan_step_complete" and cid == "c1")
    assert ready < c1_end < types.index("plan_complete")  # told first, then waited for
    assert ("notify end", "start") in log  # the side effect was not cut short


def test_a_fire_and_forget_failure_still_fails_the_run():
    result = sophon_dsl.run('notify(text="x", fail=true)\n†state.x = produce(n=1)\n', _tools([]))
    assert result.status == "failed" and result.state == {"state": {"x": 1}}
    assert next(c for c in result.calls if c.id == "c1").error.error == "Tool.Failed"


def test_no_outputs_ready_when_the_plan_has_no_fire_and_forget_call_or_only_such_calls():
    for plan in ('†state.x = produce(n=1)\n', 'notify(text="a")\nnotify(text="b")\n'):
        events: list = []
        assert sophon_dsl.run(plan, _tools([]), on_event=lambda e: events.append(e.type)).status == "succeeded"
        assert "outputs_ready" not in events, plan


def test_the_cli_says_what_the_run_still_waits_for(tmp_path):
    (tmp_path / "t.py").write_text(
        "import time\nfrom sophon_dsl import tool\n\n@tool\ndef notify(text: str) -> None:\n"
        "    \"\"\"Slow.\"\"\"\n    time.sleep(0.3)\n\n@tool\ndef produce(n: int) -> int:\n"
        "    \"\"\"Fast.\"\"\"\n    return n\n", encoding="utf-8")
    (tmp_path / "p.plan").write_text('notify(text="start")\n†state.x = produce(n=1)\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "sophon_dsl", "run", "p.plan", "--tools", "t.py"], cwd=tmp_path,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "waiting for fire-and-forget call(s) c1 (notify)" in proc.stderr
    assert '"x": 1' in proc.stdout and "waiting for" not in proc.stdout  # (notes go to stderr only)


def test_ctrl_c_while_only_fire_and_forget_calls_remain_cancels_them(tmp_path):
    import signal

    (tmp_path / "t.py").write_text(
        "import asyncio\nfrom sophon_dsl import tool\n\n@tool\nasync def notify(text: str) -> None:\n"
        "    \"\"\"Very slow.\"\"\"\n    await asyncio.sleep(60)\n\n@tool\ndef produce(n: int) -> int:\n"
        "    \"\"\"Fast.\"\"\"\n    return n\n", encoding="utf-8")
    (tmp_path / "p.plan").write_text('notify(text="start")\n†state.x = produce(n=1)\n', encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "sophon_dsl", "run", "p.plan", "--tools", "t.py"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            encoding="utf-8")
    try:
        seen = []
        for line in proc.stderr:  # the run says what it waits for: interrupt it then
            seen.append(line)
            if "waiting for fire-and-forget" in line:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = "".join(seen) + err
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert "cancelled" in err and '"x": 1' in out, (out, err)
