"""The run-time conformance corpus: every case of spec/conformance/runtime/*.yaml, one parametrized test.

Each YAML file holds ``description``, shared ``tools`` declarations and a list
of ``cases``.  A case gives a plan (``form``: dsl, json or yaml), optional
``input``, ``state`` (initial ``†state``), ``context`` (other initial kinds,
e.g. ``{"input@A": {...}}``), ``mocks`` answering every call (by call id, then
tool name; see :mod:`sophon_dsl.runtime.dryrun`) and ``expect``:

* ``status`` — the plan status;
* ``state`` — the exact resolved state (``RunResult.state``, every kind but ``input``);
* ``calls`` — ``{id: status}`` for the calls named (others unchecked);
* ``errors`` — ``{id: error name}`` (``null`` = no error);
* ``attempts`` — ``{id: attempts}``;
* ``reasons`` — ``{id: text}``: the call's recorded reason contains the text;
* ``args`` — ``{id: {param: value}}``: the arguments the call's first attempt was given;
* ``output`` — the final output of a solution (``return ...``);
* ``error`` — the run's own error name (``RunResult.error``; ``null`` = none).

Every tool is declared without code and answered by the mocks.  A case runs
through :func:`sophon_dsl.runtime.dry_run` (the real scheduler); a case with
``context`` runs through :func:`sophon_dsl.run` (dry_run takes no initial
context), with the same mock answers supplied as its latent executor and
retry delays skipped; so does a case with ``cascade`` (the run's cascade, ``skip`` or
``partial``) and a case with ``wait: true``, whose mocks' ``latency`` is
waited for in real time (a time limit such as a map's ``@timeout`` can elapse).  ``xfail: reason``
marks a case whose expectation is the spec's but which the implementation gets wrong; it must fail (strict).  See
spec/README.md#run-time-corpus.
"""

from __future__ import annotations

import re
import unicodedata
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conformance_support import collect_cases

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "spec" / "conformance" / "runtime"
LANGUAGE = ROOT / "spec" / "language.md"
CASE_KEYS = {"name", "rule", "form", "plan", "tools", "input", "state", "context", "mocks", "expect", "xfail",
             "wait", "cascade"}
EXPECT_KEYS = {"status", "state", "calls", "errors", "attempts", "reasons", "args", "output", "error"}
TOPICS = {"output_methods", "expressions", "templates", "branches", "cascade", "retries", "fire_and_forget",
          "instances", "status", "jmespath", "map_runs"}


CASES = collect_cases(CORPUS, "runtime/")


def _anchors() -> set[str]:
    """GitHub-style anchors of the headings of spec/language.md."""
    out = set()
    fence = False
    for line in LANGUAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence or not line.startswith("#"):
            continue
        m = re.match(r"#+\s+(.*)", line)
        if m:
            text = unicodedata.normalize("NFKC", m.group(1)).strip().lower()
            text = re.sub(r"[^\w\- ]", "", text)
            out.add(text.replace(" ", "-"))
    return out


def _registry(tools: dict):
    from sophon_dsl.model import Risk
    from sophon_dsl.tools import ToolRegistry, ToolSpec

    return ToolRegistry([
        ToolSpec(name, (decl or {}).get("description", ""), (decl or {}).get("input"),
                 (decl or {}).get("output"), Risk.parse((decl or {}).get("risk", "none")), func=None)
        for name, decl in tools.items()
    ])


def test_corpus_is_well_formed():
    assert {p.stem for p in CORPUS.glob("*.yaml")} == TOPICS
    names = Counter(p.id for p in CASES)
    assert not [n for n, k in names.items() if k > 1], "duplicate case names"
    anchors = _anchors()
    for p in CASES:
        _, _, case = p.values
        assert set(case) <= CASE_KEYS, (p.id, set(case) - CASE_KEYS)
        assert case.get("form") in ("dsl", "json", "yaml"), p.id
        assert isinstance(case.get("plan"), str), p.id
        assert isinstance(case.get("expect"), dict) and set(case["expect"]) <= EXPECT_KEYS, p.id
        rule = case.get("rule") or ""
        page, _, anchor = rule.partition("#")
        assert page == "language.md" and anchor in anchors, (p.id, rule)


def _run(case: dict, registry):
    from sophon_dsl.loader import parse
    from sophon_dsl.runtime import dry_run

    loaded = parse(case["plan"], format=case["form"], file="case")
    errors = [d for d in loaded.diagnostics if d.is_error]
    assert not errors, [f"{d.code} {d.message}" for d in errors]
    if "context" not in case and not case.get("wait") and "cascade" not in case:
        report = dry_run(loaded.plan, registry, mocks=case.get("mocks") or {}, input=case.get("input"),
                         state=case.get("state"))
        return report.result, report.arguments
    import sophon_dsl
    from sophon_dsl.runtime.dryrun import _MockExecutor

    async def no_sleep(_delay):
        return None

    mock = _MockExecutor(case.get("mocks") or {}, registry)
    executor = _Waiting(mock) if case.get("wait") else mock
    result = sophon_dsl.run(loaded.plan, registry, input=case.get("input"), state=case.get("state"),
                            context=case.get("context"), executor=executor, approve=True, sleep=no_sleep,
                            cascade=case.get("cascade", "skip"))
    return result, mock.arguments


class _Waiting:
    """The mocks of a ``wait: true`` case: each answer comes after its ``latency``, in real time."""

    def __init__(self, mock) -> None:
        self.mock = mock

    async def execute(self, request):
        import asyncio

        try:
            return await self.mock.execute(request)
        finally:
            await asyncio.sleep(self.mock.latency[request.call_id][-1])


@pytest.mark.parametrize("file_name, file_tools, case", CASES)
def test_conformance_runtime(file_name, file_tools, case):
    registry = _registry({**file_tools, **(case.get("tools") or {})})
    result, arguments = _run(case, registry)
    expect = case["expect"]
    recs = {r.id: r for r in result.calls}
    shown = "\n".join(f"  {r.id}: {r.status} attempts={r.attempts} "
                      f"error={r.error.error if r.error else None} reason={r.reason}" for r in result.calls)
    shown = f"status {result.status}; state {result.state}\n{shown}"
    if "status" in expect:
        assert result.status == expect["status"], shown
    if "state" in expect:
        assert result.state == expect["state"], shown
    if "output" in expect:
        assert result.output == expect["output"], shown
    if "error" in expect:
        assert (result.error.error if result.error else None) == expect["error"], (result.error, shown)
    for cid, status in (expect.get("calls") or {}).items():
        assert cid in recs, (cid, shown)
        assert recs[cid].status == status, (cid, shown)
    for cid, name in (expect.get("errors") or {}).items():
        got = recs[cid].error.error if recs[cid].error else None
        assert got == name, (cid, shown)
    for cid, n in (expect.get("attempts") or {}).items():
        assert recs[cid].attempts == n, (cid, shown)
    for cid, text in (expect.get("reasons") or {}).items():
        assert text in (recs[cid].reason or ""), (cid, recs[cid].reason, shown)
    for cid, args in (expect.get("args") or {}).items():
        assert cid in arguments, (cid, "was never invoked", shown)
        assert arguments[cid][0] == args, (cid, arguments[cid][0], shown)
