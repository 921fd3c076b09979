"""Map bodies on a Dask cluster (issue 24, item 8): the preflight and the routing see the
tools of map bodies, nested ones included, exactly as they see top-level calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.maps import called_tools, every_call
from sophon_dsl.runtime.errors import PlanInvalid
from sophon_dsl.scaleout import DaskExecutor
from sophon_dsl.toolsource import load_tool_source

TOOLS = str(Path(__file__).with_name("remote_tools.py"))

IN_MAP = "$state.r = map($input.xs, as=x) { $local.c = where()\n$local.g = gpu_interval(seconds=0) }\n"
IN_NESTED = ("$state.r = map($input.xs, as=x) {\n"
             "  $local.w = where()\n"
             "  $local.m = map($input.xs, as=y) { $local.g = gpu_interval(seconds=0) }\n"
             "}\n")


@pytest.fixture(scope="module")
def tools():
    specs, diags = load_tool_source(TOOLS)
    assert not diags
    return specs


def test_every_call_walks_nested_map_bodies():
    plan = sophon_dsl.loads(IN_NESTED)
    assert [c.tool for c in every_call(plan.calls)] == ["map", "where", "map", "gpu_interval"]
    assert called_tools(plan.calls) == ["map", "where", "gpu_interval"]


@pytest.mark.parametrize("text", [IN_MAP, IN_NESTED], ids=["map", "nested-map"])
def test_a_body_tool_no_worker_can_run_is_refused_up_front_on_the_command_line(tmp_path, capsys, text):
    # dask:local-threads offers no resources: gpu_interval (GPU: 1) can run on no worker
    plan = tmp_path / "m.plan"
    plan.write_text(text)
    code = main(["run", str(plan), "--tools", TOOLS, "--no-store", "--executor", "dask:local-threads",
                 "--input", json.dumps({"xs": [1, 2]})])
    out, err = capsys.readouterr()
    assert code == 1 and out == "", err
    assert "error[E705]" in err and "gpu_interval" in err and "GPU=1" in err
    assert "nothing was started" in err and "Traceback" not in err
    assert "Executor.Refused" not in err  # not an item failing mid-run


def test_a_body_tool_is_refused_before_any_call_starts(gpu_cluster, tools):
    events = []
    plan = "$state.w = where()\n$state.r = map($input.xs, as=x) { $local.t = needs_tpu() }\n"
    with pytest.raises(PlanInvalid) as info:
        sophon_dsl.run(plan, tools, input={"xs": [1]}, on_event=events.append,
                       tool_executor=DaskExecutor(gpu_cluster.scheduler_address))
    [diag] = info.value.diagnostics
    assert diag.code == "E705" and "needs_tpu" in diag.message and "TPU=1" in diag.message
    assert not [e for e in events if e.type.startswith("plan_step")]


def test_body_calls_are_routed_like_top_level_calls(gpu_cluster, tools):
    # where (routed by the config) goes to the cluster from a nested body; where_async (kept
    # local by the config) and where_local (placement="local") stay here
    ex = DaskExecutor(gpu_cluster.scheduler_address,
                      routing={"tools": {"where*": {"executor": "dask"}}, "local": ["where_async"]})
    plan = ("$state.r = map($input.xs, as=x) {\n"
            "  $local.a = where_async(n=$x)\n"
            "  $local.m = map($input.xs, as=y) { $local.w = where()\n$local.l = where_local() }\n"
            "}\n")
    result = sophon_dsl.run(plan, tools, input={"xs": [1, 2]}, tool_executor=ex)
    assert result.status == "succeeded", result.error
    sent = [k.split("/", 1)[1] for k in ex.last_keys]
    assert len(sent) == 4 and all(k.endswith(".where/1") for k in sent), sent  # 2 x 2 items of `where`, nothing else
