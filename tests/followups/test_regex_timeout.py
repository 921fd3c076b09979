"""text.regex_extract / text.split bound a catastrophic regex: the call fails with
Text.RegexTimeout and the run ends (it used to hang on Python's `re`)."""

from __future__ import annotations

import json
import subprocess
import sys

PLAN = ('bad: $state.m = text.regex_extract(text="{text}", pattern="(a|aa)+c")\n'
        'cut: $state.p = text.split(text="{text}", separator="(a|aa)+c", regex=true)\n'
        'ok: $state.n = text.regex_extract(text="a1 b22", pattern="\\\\d+")\n')


def test_catastrophic_regex_is_a_named_error(tmp_path):
    plan = tmp_path / "plan.plan"
    plan.write_text(PLAN.format(text="a" * 64), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "sophon_dsl", "run", str(plan), "--json"],
                          capture_output=True, text=True, timeout=60)
    report = json.loads(done.stdout)
    calls = {c["id"]: c for c in report["calls"]}
    assert calls["bad"]["error"]["error"] == "Text.RegexTimeout", calls["bad"]
    assert "(a|aa)+c" in calls["bad"]["error"]["cause"]
    assert calls["cut"]["error"]["error"] == "Text.RegexTimeout"
    assert calls["ok"]["status"] == "succeeded" and [m["match"] for m in report["state"]["state"]["n"]] == ["1", "22"]
