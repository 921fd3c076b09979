"""Issue 24, item 5: JMESPath in plan references runs in the same bounded interpreter as
``data.query`` (``sophon_dsl.jmes_bounded``: steps, size, nesting, the run's deadline).

Hang guards join a worker thread with a generous limit and memory guards read tracemalloc's
peak: on the code before the fix, the join plan below built a 1 GB string and succeeded, and
the list variant ran 42 s past ``max_time=5`` into MemoryError.  Nothing here asserts a time.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from typing import Any

import pytest

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.jmes_bounded import MAX_QUERY_DEPTH, QueryLimits, QueryTooExpensive, compile_query, search
from sophon_dsl.loader import parse
from sophon_dsl.runtime.reference import areference_run

from hang_guard import finishes

DOUBLE = " | join('', [@, @])"
JOIN_BOMB = "†{input.s" + DOUBLE * 30 + "}"  # 2 ** 31 characters from "ab": a 1.3 KB reference
LIST_BOMB = "†{input.xs" + " | [@,@,@,@,@,@,@,@,@,@][]" * 9 + "}"  # 10 ** 9 elements


@sophon_dsl.tool(name="size")
def size(v: Any) -> int:
    return len(v) if isinstance(v, (str, list)) else -1


@sophon_dsl.tool(name="make")
def make(n: int) -> list:
    return list(range(n))


@sophon_dsl.tool(name="text")
def text(n: int) -> str:
    return "x" * n


def _bounded(fn: Any, limit: float = 60.0) -> tuple[Any, int]:
    """``fn()`` under the hang guard, and tracemalloc's peak while it ran."""
    tracemalloc.start()
    try:
        value = finishes(fn, limit, "still running: the reference was not bounded")
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _call(result: Any, cid: str) -> Any:
    return next(c for c in result.calls if c.id == cid)


def _error(result: Any, cid: str) -> str | None:
    rec = _call(result, cid)
    return rec.error.error if rec.error else None


# --------------------------------------------------------------------------- the reported plans

def test_the_join_bomb_fails_its_call_through_the_cli(tmp_path, capsys):
    plan = tmp_path / "bomb.plan"
    plan.write_text(f'†state.n = size(v="{JOIN_BOMB}")\n', encoding="utf-8")
    tools = tmp_path / "t.py"
    tools.write_text("import sophon_dsl\n\n@sophon_dsl.tool(name='size')\ndef size(v: str) -> int:\n"
                     "    return len(v)\n", encoding="utf-8")
    assert len(plan.read_bytes()) < 1400
    capsys.readouterr()
    code = finishes(lambda: main(["run", str(plan), "--tools", str(tools), "--no-store", "--input", '{"s": "ab"}',
                                  "--max-time", "5", "--json"]), 120, "the run never ended")
    out = capsys.readouterr()
    assert code == 1 and "Traceback" not in out.err
    result = json.loads(out.out)
    assert result["status"] == "failed"
    call = result["calls"][0]
    assert call["status"] == "failed" and call["attempts"] == 0  # the tool never ran
    assert call["error"]["error"] == "Ref.TooExpensive"
    assert "16,777,216 bytes" in call["error"]["cause"]


def test_the_join_bomb_stays_small_in_memory():
    result, peak = _bounded(lambda: sophon_dsl.run(f'†state.n = size(v="{JOIN_BOMB}")\n', [size],
                                                   input={"s": "ab"}))
    assert result.status == "failed" and _error(result, "c1") == "Ref.TooExpensive"
    assert peak < 160 << 20  # (a 16 MiB string and its copies at most; it was 1 GB)


def test_the_list_bomb_fails_its_call():
    plan = f"†state.n = size(v=${LIST_BOMB[1:]})\n"
    # (max_time only as a backstop: the step bound is what must stop it, even on a loaded machine)
    result, peak = _bounded(lambda: sophon_dsl.run(plan, [size], input={"xs": [1, 2, 3]}, max_time=120))
    assert result.status == "failed" and _error(result, "c1") == "Ref.TooExpensive"
    assert "steps" in _call(result, "c1").error.cause
    assert peak < 160 << 20


def test_a_bound_is_reported_by_dry_run_too(tmp_path, capsys):
    plan = tmp_path / "bomb.plan"
    plan.write_text(f'†state.n = size(v="{JOIN_BOMB}")\n', encoding="utf-8")
    tools = tmp_path / "t.py"
    tools.write_text("import sophon_dsl\n\n@sophon_dsl.tool(name='size')\ndef size(v: str) -> int:\n"
                     "    return len(v)\n", encoding="utf-8")
    capsys.readouterr()
    code = finishes(lambda: main(["dry-run", str(plan), "--tools", str(tools), "--input", '{"s": "ab"}', "--json"]),
                    120, "dry-run never ended")
    report = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and report["calls"][0]["error"]["error"] == "Ref.TooExpensive"


# --------------------------------------------------------------------------- time: max_time stops a busy evaluation

BUSY = "†{state.xs | [*].to_string(@) | [*].length(@) | [*].to_string(@) | [*].length(@)}"


def test_a_busy_reference_stops_at_the_runs_time_limit():
    plan = f"†state.xs = make(n=200000)\n†state.n = size(v={BUSY.replace('†', '$', 1)})\n"
    result = finishes(lambda: sophon_dsl.run(plan, [make, size], max_time=0.5), 60, "the run never ended")
    assert result.status == "failed"
    rec = _call(result, "c2")
    # the evaluation stops at the deadline (Ref.TooExpensive naming max_time, the run
    # Plan.Timeout); on a loaded machine the deadline may pass before c2 starts, and c2 is
    # then cancelled by the run's time limit: either way it never runs to its end
    if rec.status == "failed":
        assert rec.error.error == "Ref.TooExpensive" and "max_time" in rec.error.cause
    else:
        assert rec.status == "cancelled" and rec.error.error == "Plan.Timeout", rec


# --------------------------------------------------------------------------- nesting

def test_an_expression_nested_too_deeply_is_e105_everywhere(tmp_path, capsys):
    deep = "†{input.s" + " | @" * (MAX_QUERY_DEPTH + 10) + "}"
    text = f'†state.n = size(v="{deep}")\n'
    result = parse(text, "dsl")
    assert [d.code for d in result.diagnostics] == ["E105"]
    assert f"nested more than {MAX_QUERY_DEPTH} levels" in result.diagnostics[0].message
    assert "literal dagger" not in result.diagnostics[0].message  # (no hint about a dagger meant as text)
    brackets = "†{input.s | " + "(" * 3000 + "@" + ")" * 3000 + "}"
    assert [d.code for d in parse(f'size(v="{brackets}")\n', "dsl").diagnostics] == ["E105"]
    plan = tmp_path / "deep.plan"
    plan.write_text(text, encoding="utf-8")
    capsys.readouterr()
    assert main(["run", str(plan), "--no-store", "--json", "--input", '{"s": "ab"}']) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "E105" in out.out + out.err


def test_a_reasonable_pipeline_still_compiles():
    ok = "†{input.s" + " | @" * 40 + "}"
    result = sophon_dsl.run(f'†state.n = size(v="{ok}")\n', [size], input={"s": "abc"})
    assert result.status == "succeeded" and result.state["state"]["n"] == 3


def test_the_core_interpreter_reports_which_bound():
    with pytest.raises(QueryTooExpensive) as info:
        compile_query("@" + " | @" * (MAX_QUERY_DEPTH + 1))
    assert info.value.bound == "depth"
    with pytest.raises(QueryTooExpensive) as info:
        search(compile_query("[*].a"), [{"a": 1}] * 5000, QueryLimits(max_steps=1000))
    assert info.value.bound == "steps"
    with pytest.raises(QueryTooExpensive) as info:
        search(compile_query("to_string(@)"), "x" * 10_000, QueryLimits(max_bytes=5000))
    assert info.value.bound == "size"
    with pytest.raises(QueryTooExpensive) as info:
        search(compile_query("[*].a"), [{"a": 1}] * 5000, QueryLimits(stop=lambda: "timeout"))
    assert info.value.bound == "time"
    assert search(compile_query("[?a > `1`].a"), [{"a": 1}, {"a": 2}]) == [2]


def test_to_string_nested_cannot_double_its_text_forever():
    expr = "to_string([" * 40 + "@" + ", @])" * 40  # each level doubles the text and escapes its quotes
    with pytest.raises(QueryTooExpensive) as info:
        finishes(lambda: search(compile_query(expr), "x"), 60)
    assert info.value.bound in ("size", "steps")


# --------------------------------------------------------------------------- semantics around the bound

def test_a_fallback_is_not_taken_when_the_first_alternative_is_too_expensive():
    plan = f'†state.n = size(v=${JOIN_BOMB[1:]} || $input.s)\n'
    result, _ = _bounded(lambda: sophon_dsl.run(plan, [size], input={"s": "ab"}))
    assert _error(result, "c1") == "Ref.TooExpensive"


def test_a_broken_read_still_skips_before_a_bound_fails():
    @sophon_dsl.tool(name="boom")
    def boom() -> str:
        raise RuntimeError("no")

    plan = f'†state.b = boom()\n†state.n = size(v="{JOIN_BOMB} †state.b")\n'
    result, _ = _bounded(lambda: sophon_dsl.run(plan, [size, boom], input={"s": "ab"}))
    assert _call(result, "c2").status == "skipped"


def test_a_templates_text_is_bounded_like_a_value():
    refs = " ".join(["†state.t"] * 20)  # 20 x 1 MiB of text, over max_result_bytes (16 MiB)
    plan = f'†state.t = text(n={1 << 20})\n†state.n = size(v="{refs}")\n'
    result, peak = _bounded(lambda: sophon_dsl.run(plan, [text, size]))
    assert _error(result, "c2") == "Ref.TooExpensive" and "template" in _call(result, "c2").error.cause
    assert peak < 160 << 20
    ok = sophon_dsl.run(f'†state.t = text(n=10)\n†state.n = size(v="{refs}")\n', [text, size])
    assert ok.status == "succeeded" and ok.state["state"]["n"] == 20 * 10 + 19


def test_the_plans_output_past_a_bound_fails_the_run():
    plan = f'†state.n = size(v="ok")\nreturn ${JOIN_BOMB[1:]}\n'
    result, _ = _bounded(lambda: sophon_dsl.run(plan, [size], input={"s": "ab"}))
    assert result.status == "failed" and result.error.error == "Ref.TooExpensive"
    assert "output" in result.error.cause


def test_a_map_whose_body_reads_a_reference_past_its_bounds_fails():
    plan = ("$state.r = map($input.xs, as=x) {\n"
            f"    $local.n = size(v=${JOIN_BOMB[1:]})\n"
            "}\n")
    result, _ = _bounded(lambda: sophon_dsl.run(plan, [size], input={"xs": [1, 2], "s": "ab"}))
    assert result.status == "failed"
    assert _error(result, "c1") == "Ref.TooExpensive"


def test_the_reference_interpreter_agrees():
    plan = sophon_dsl.loads(f'†state.n = size(v="{JOIN_BOMB}")\n†state.m = size(v=$input.s)\n')
    a = finishes(lambda: sophon_dsl.run(plan, [size], input={"s": "ab"}), 60)
    b = finishes(lambda: asyncio.run(areference_run(plan, [size], input={"s": "ab"})), 60)
    assert [(c.status, c.error.error if c.error else None) for c in a.calls] == \
        [(c.status, c.error.error if c.error else None) for c in b.calls] == \
        [("failed", "Ref.TooExpensive"), ("succeeded", None)]


def test_data_query_and_references_share_one_interpreter():
    import stdlib_tools.data as data

    assert not hasattr(data, "_BoundedInterpreter")  # the core's, not a copy
    plan = f'†state.x = data.query(value=[1, 2, 3], expression="{"@" + " | @" * (MAX_QUERY_DEPTH + 5)}")\n'
    result = sophon_dsl.run(plan)
    assert _error(result, "c1") == "Data.InvalidQuery"


# --------------------------------------------------------------------------- random expressions

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402
from jmespath.exceptions import JMESPathError  # noqa: E402

from sophon_dsl.runtime.validation import json_size  # noqa: E402

_STAGES = ["[@, @]", "[@, @, @, @, @, @, @, @, @, @][]", "join('', [@, @])", "to_string([@, @])", "[*]", "[]",
           "sort(@)", "length(@)", "{a: @, b: @}", "values(@)", "reverse(@)", "[?@ == @]", "max_by(@, &@)",
           "[0]", "[-1:]", "not_null(@, `1`)", "merge(@, @)", "keys(@)", "@", "to_array(@)"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_STAGES), min_size=1, max_size=25),
       st.sampled_from(["ab", [1, 2, 3], {"a": "x"}, [[1], [2, [3]]], None, 7]))
def test_random_pipelines_end_within_their_bounds(stages, value):
    """Whatever a pipeline of growing stages asks, the interpreter answers with a value within
    its size bound, a JMESPath error of the expression itself, or QueryTooExpensive."""
    limits = QueryLimits(max_steps=20_000, max_bytes=1 << 16)
    try:
        result = search(compile_query(" | ".join(stages)), value, limits)
    except (QueryTooExpensive, JMESPathError):
        return
    size = json_size(result, limits.max_bytes)
    assert size is not None and size <= limits.max_bytes


def test_a_slice_step_of_zero_is_an_expression_error_not_a_crash():
    """Found by tests/test_security_fuzz_runtime.py: `[1:2:0]` raised ValueError out of run()."""
    @sophon_dsl.tool(name="echo0")
    def echo0(v: object = None) -> object:
        return v

    plan = "$state.r = echo0(v=${input.d | contains(@[1:2:0], 'x')})\nreturn $state.r\n"
    result = sophon_dsl.run(plan, tools=[echo0], input={"d": [1, 2, 3]})
    assert result.status == "succeeded" and result.output is None  # an expression error reads as null
    query = sophon_dsl.run('$state.r = data.query(value=[1, 2, 3], expression="[1:2:0]")', approve=True)
    assert query.calls[0].error is not None and query.calls[0].error.error.startswith("Data.")
