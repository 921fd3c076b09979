"""benchmarks/bench_agents.py's data (issue 30): the replies derived from each task's DAG are what
the approaches need, and the stream limit is computed as the issue defines it.  No timings."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from sophon_dsl import check
from sophon_dsl.loader import loads
from sophon_dsl.tools import tool

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_agents.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_agents", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_agents"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def tasks(bench):
    return {t.name: t for t in bench.load_tasks(BENCH.with_name("agent_tasks.yaml"))}


def test_the_issue_tasks_are_there(tasks):
    sizes = {name: t.size for name, t in tasks.items()}
    assert sizes["parallel_qa"] == 5 and sizes["hotpot_qa"] == 3 and sizes["movie_rec"] == 9
    assert sizes["chain"] == 3 and sizes["map20"] == 21 and sizes["mixed"] == 12


def test_replies_follow_the_dag(bench, tasks):
    for t in tasks.values():
        wave = t.waves()
        react = bench.react_replies(t)
        assert len(react) == t.size + 1 and react[-1][0] == "text"
        assert [len(r[1]) for r in react[:-1]] == [1] * t.size   # one call per turn
        node_of = {(s.tool, bench.compact(s.args)): s.node for s in t.steps()}
        waves = [wave[node_of[(r[1][0][0], bench.compact(r[1][0][1]))]] for r in react[:-1]]
        assert waves == sorted(waves)   # in dependency order
        fc = bench.parallel_replies(t)
        assert len(fc) == len(set(wave.values())) + 1
        assert sum(len(r[1]) for r in fc[:-1]) == t.size


def test_the_dsl_reply_checks_against_the_tools(bench, tasks):
    for t in tasks.values():
        box = bench.ToolBox(t)
        tools = [tool(f, name=f.__name__, description=f.__doc__) for f in box.functions()]
        text = bench.dsl_reply(t)
        assert text.count("\n") == len(t.nodes) + 1   # one line per call or map, then return
        diags = [d for d in check(loads(text), tools) if d.is_error]
        assert diags == [], (t.name, diags)


def test_stream_limit(bench, tasks):
    t = tasks["chain"]   # three calls, each reading the one before
    text = bench.dsl_reply(t)
    lines = text.split("\n")
    ends = [sum(len(x) + 1 for x in lines[:k + 1]) for k in range(3)]
    served = bench.Served(arrived=0.0, input_tokens=1, text=text,
                          chunks=[(ends[0], 1.0), (ends[1], 1.2), (ends[2], 1.4), (len(text), 1.6)])
    lat = [n.latency for n in t.nodes]
    # each call starts when its line streamed or its input was written, whichever is later
    first = 1.0 + lat[0]
    second = max(1.2, first) + lat[1]
    third = max(1.4, second) + lat[2]
    assert bench.stream_limit(t, served, 0.0) == pytest.approx(max(third, 1.6))
