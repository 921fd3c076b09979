"""Local and Dask runs of the same random plans agree: final state, every call's status,
attempts and error names (the plans and tool of the scheduler/reference agreement test)."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings, strategies as st

from sophon_dsl.runtime import arun
from sophon_dsl.runtime.errors import PlanInvalid
from sophon_dsl.scaleout import DaskExecutor

from runtime.test_reference_agreement import _names_only, make_tool, plans


async def _both(plan, behaviours, latencies, inp, executor):
    out = []
    for ex in (None, executor):
        try:
            # each run gets its own tool: its attempt counters start from zero
            out.append(await arun(plan, [make_tool(behaviours, latencies)], input=inp, state={"seed": 1},
                                  validate_input=False, tool_executor=ex))
        except PlanInvalid as exc:
            out.append(sorted(d.code for d in exc.diagnostics))
    return out


def test_local_and_dask_runs_agree(gpu_cluster):
    address = gpu_cluster.scheduler_address

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(plans(), st.booleans())
    def agree(case, with_input):
        plan, behaviours, latencies = case
        ex = DaskExecutor(address)
        local, remote = asyncio.run(_both(plan, behaviours, latencies, {"x": "hi"} if with_input else None, ex))
        if isinstance(local, list) or isinstance(remote, list):
            assert local == remote
            return
        assert remote.status == local.status
        assert _names_only(remote.state) == _names_only(local.state)
        assert [(c.id, c.status, c.attempts, c.error.error if c.error else None) for c in remote.calls] == \
            [(c.id, c.status, c.attempts, c.error.error if c.error else None) for c in local.calls]
        assert len(set(ex.last_keys)) == sum(c.attempts for c in remote.calls)  # every attempt ran there

    agree()
