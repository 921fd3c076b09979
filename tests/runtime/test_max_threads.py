"""Issue 30 item 7: sync tools run in a thread pool sized for I/O-bound tools (``max_threads``).

No timings: 20 sync tools meet at a barrier of 20, which they can only pass when all 20 run at
once; a smaller pool is observed by counting the tools in flight.
"""

from __future__ import annotations

import threading
import time

import pytest

from sophon_dsl.runtime import run
from sophon_dsl.runtime.invoker import DEFAULT_MAX_THREADS
from sophon_dsl.tools import tool

PLAN = "".join(f"$state.r{i} = wait(i={i})\n" for i in range(20))


def test_default_pool_runs_twenty_sync_tools_at_once():
    assert DEFAULT_MAX_THREADS >= 64
    barrier = threading.Barrier(20)

    @tool
    def wait(i: int) -> int:
        barrier.wait(timeout=30)  # broken (an error) unless all 20 are running together
        return i

    result = run(PLAN, [wait])
    assert result.status == "succeeded", [c.error for c in result.calls if c.error]
    assert result.state["state"] == {f"r{i}": i for i in range(20)}


@pytest.mark.parametrize("name", ["max_threads", "max_workers"])
def test_max_threads_bounds_the_sync_tools_in_flight(name):
    lock = threading.Lock()
    now = [0, 0]  # in flight, most seen

    @tool
    def wait(i: int) -> int:
        with lock:
            now[0] += 1
            now[1] = max(now)
        time.sleep(0.01)
        with lock:
            now[0] -= 1
        return i

    result = run(PLAN, [wait], **{name: 3})
    assert result.status == "succeeded"
    assert 1 <= now[1] <= 3


@pytest.mark.parametrize("options,message", [
    ({"max_threads": 0}, "max_threads must be a positive integer"),
    ({"max_threads": 2.5}, "max_threads must be a positive integer"),
    ({"max_threads": 4, "max_workers": 8}, "max_threads .* and max_workers"),
])
def test_bad_max_threads_is_refused(options, message):
    @tool
    def wait(i: int) -> int:
        raise AssertionError("must not run")

    with pytest.raises(ValueError, match=message):
        run(PLAN, [wait], **options)


def test_cli_flag_is_validated(tmp_path, capsys):
    from sophon_dsl.cli import main

    plan = tmp_path / "p.sophon"
    plan.write_text('$state.x = math.eval(expression="1+1")\n')
    with pytest.raises(SystemExit) as info:
        main(["run", str(plan), "--max-threads", "0"])
    assert info.value.code == 2 and "--max-threads" in capsys.readouterr().err
    assert main(["run", str(plan), "--max-threads", "8", "--json", "--no-store"]) == 0
