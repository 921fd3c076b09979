"""Worker resources and placement on a Dask cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

import sophon_dsl
from sophon_dsl.runtime.errors import PlanInvalid
from sophon_dsl.scaleout import DaskExecutor
from sophon_dsl.toolsource import load_tool_source


@pytest.fixture(scope="module")
def tools():
    specs, _ = load_tool_source(str(Path(__file__).with_name("remote_tools.py")))
    return specs


def test_gpu_1_on_one_worker_serialises_the_calls(gpu_cluster, tools):
    plan = "\n".join(f"†state.i{k} = gpu_interval(seconds=0.05)" for k in range(4))
    result = sophon_dsl.run(plan, tools, tool_executor=DaskExecutor(gpu_cluster.scheduler_address))
    assert result.status == "succeeded"
    spans = sorted(result.state["state"].values())
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end  # four threads, one GPU: never two at once


def test_config_resources_apply_too(gpu_cluster, tools):
    ex = DaskExecutor(gpu_cluster.scheduler_address, routing={"tools": {"sleepy": {"resources": {"GPU": 1}}}})
    plan = "\n".join(f"†state.s{k} = sleepy(seconds=0.01)" for k in range(2))
    assert sophon_dsl.run(plan, tools, tool_executor=ex).status == "succeeded"
    ex = DaskExecutor(gpu_cluster.scheduler_address, routing={"tools": {"sleepy": {"resources": {"GPU": 2}}}})
    with pytest.raises(PlanInvalid) as info:
        sophon_dsl.run(plan, tools, tool_executor=ex)
    assert [d.code for d in info.value.diagnostics] == ["E705"]


def test_unsatisfiable_resources_are_refused_before_anything_runs(gpu_cluster, tools):
    events = []
    with pytest.raises(PlanInvalid) as info:
        sophon_dsl.run("†state.w = where()\n†state.t = needs_tpu()", tools,
                       tool_executor=DaskExecutor(gpu_cluster.scheduler_address), on_event=events.append)
    [diag] = info.value.diagnostics
    assert diag.code == "E705" and "needs_tpu" in diag.message and "TPU=1" in diag.message
    assert "GPU=1" in diag.message  # what the workers do offer
    assert not [e for e in events if e.type.startswith("plan_step")]


def test_routing_keeps_tools_local(gpu_cluster, tools):
    import os

    ex = DaskExecutor(gpu_cluster.scheduler_address, routing={"tools": {"where*": {"executor": "dask"}},
                                                               "local": ["where_async"]})
    result = sophon_dsl.run("†state.a = where_async(n=1)\n†state.b = sleepy(seconds=0)\n†state.c = where()",
                            tools, tool_executor=ex)
    assert result.status == "succeeded"
    assert [k.split("/")[1] for k in ex.last_keys] == ["c3"]  # only `where` went to the cluster
    assert result.state["state"]["a"]["pid"] == os.getpid()


def test_workers_on_another_sophon_dsl_version_are_refused(gpu_cluster, tools, monkeypatch):
    from sophon_dsl.scaleout import preflight

    monkeypatch.setattr(preflight, "local_version", lambda: "9.9.9")  # the coordinator's only
    with pytest.raises(PlanInvalid) as info:
        sophon_dsl.run("†state.w = where()", tools, tool_executor=DaskExecutor(gpu_cluster.scheduler_address))
    assert {d.code for d in info.value.diagnostics} == {"E706"}
    assert "9.9.9" in info.value.diagnostics[0].message


def test_an_unreachable_scheduler_is_refused(tools):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PlanInvalid) as info:
        sophon_dsl.run("†state.w = where()", tools, tool_executor=DaskExecutor(f"tcp://127.0.0.1:{port}",
                                                                            connect_timeout=1))
    assert [d.code for d in info.value.diagnostics] == ["E703"]


def test_calls_ready_together_go_in_one_submission_per_resource_set(gpu_cluster, tools, monkeypatch):
    import distributed

    batches = []
    real_map = distributed.Client.map

    def counting_map(self, func, *iterables, key=None, resources=None, **kw):
        batches.append((len(key), resources))
        return real_map(self, func, *iterables, key=key, resources=resources, **kw)

    monkeypatch.setattr(distributed.Client, "map", counting_map)
    plan = "\n".join([*(f"†state.s{k} = sleepy(seconds=0)" for k in range(6)),
                      *(f"†state.g{k} = gpu_interval(seconds=0)" for k in range(3)),
                      "†state.after = sleepy(seconds=†state.s0)"])
    result = sophon_dsl.run(plan, tools, tool_executor=DaskExecutor(gpu_cluster.scheduler_address))
    assert result.status == "succeeded"
    assert sorted(batches, key=str) == sorted([(6, None), (3, {"GPU": 1}), (1, None)], key=str)


def test_a_run_with_nothing_routed_needs_no_cluster(tools):
    import os

    ex = DaskExecutor("tcp://127.0.0.1:9", connect_timeout=1)  # nothing listens there
    result = sophon_dsl.run("†state.here = where_local()", tools, tool_executor=ex)
    assert result.status == "succeeded" and result.state["state"]["here"] == os.getpid()


def test_losing_the_scheduler_mid_run_is_a_named_error_not_a_hang(tools, tmp_path):
    import threading

    import distributed

    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0")
    release = tmp_path / "release"
    ex = DaskExecutor(cluster.scheduler_address)

    def pull_the_plug():
        for _ in range(1000):  # once the call is on the cluster
            if ex.last_keys:
                break
            threading.Event().wait(0.01)
        cluster.close()

    threading.Thread(target=pull_the_plug, daemon=True).start()
    try:
        result = sophon_dsl.run(f'†state.x || †state.err = blocks(path="{release}", seconds=20)', tools,
                                tool_executor=ex)
    finally:
        release.touch()
    assert result.calls[0].error.error == "Executor.Lost"
    assert result.state["state"]["err"]["error"] == "Executor.Lost"
