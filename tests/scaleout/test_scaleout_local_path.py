"""The local path never imports Dask: not on ``import sophon_dsl``, not for a local run, not for
``sophon-dsl run --executor local``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sophon_dsl.scaleout.config import ExecutorConfigError, parse_executor_spec, routing_from_data

PROBE = r'''
import sys
import sophon_dsl
from sophon_dsl.cli import main
sophon_dsl.run("$state.x = f()", {"f": lambda: 1})
print("SCALEOUT", sorted(m for m in sys.modules if m.startswith("sophon_dsl.scaleout")))
open(sys.argv[1] + "/p.plan", "w").write("$state.y = g()\n")
open(sys.argv[1] + "/t.py", "w").write("from sophon_dsl import tool\n\n@tool\ndef g() -> int:\n    return 2\n")
assert main(["run", sys.argv[1] + "/p.plan", "--tools", sys.argv[1] + "/t.py", "--executor", "local", "--json"]) == 0
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed", "cloudpickle"))
print("HEAVY", heavy)
'''


def test_no_dask_import_on_the_local_path(tmp_path):
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env={"PATH": "", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert "SCALEOUT []" in proc.stdout  # a local run: not even the scale-out package
    assert "HEAVY []" in proc.stdout  # --executor local: the spec is read, Dask is never imported


@pytest.mark.parametrize("spec, kind, target", [
    ("local", "local", None), ("dask:local", "cluster", None), ("dask:local-threads", "cluster", None),
    ("dask:tcp://10.0.0.5:8786", "address", "tcp://10.0.0.5:8786"),
    ("dask:scheduler-file:/tmp/s.json", "scheduler-file", "/tmp/s.json"),
])
def test_executor_specs(spec, kind, target):
    parsed = parse_executor_spec(spec)
    assert (parsed.kind, parsed.target) == (kind, target)
    assert parsed.processes == (spec != "dask:local-threads")


@pytest.mark.parametrize("data, why", [
    ([1], "must be a mapping"), ({"tool": {}}, "unknown key"), ({"local": "x"}, "'local' must be a list"),
    ({"tools": {"a": {"executor": "ray"}}}, "must be 'dask' or 'local'"),
    ({"tools": {"a": {"resources": {"GPU": -1}}}}, "positive amounts"),
    ({"tools": {"a": {"where": 1}}}, "unknown key"),
])
def test_bad_executor_configs(data, why):
    with pytest.raises(ExecutorConfigError) as info:
        routing_from_data(data, "x.yaml")
    [diag] = info.value.diagnostics
    assert diag.code == "E702" and why in diag.message and diag.file == "x.yaml"


def test_routing_decisions():
    routing = routing_from_data({"tools": {"ml.*": {"resources": {"GPU": 1}}, "text.*": {"executor": "local"}},
                                 "local": ["ml.audit"]})
    assert routing.decide("ml.train") == (True, {"GPU": 1})
    assert routing.decide("ml.audit") == (False, None)
    assert routing.decide("text.x") == (False, None)
    assert routing.decide("other") == (False, None)  # a tools section narrows: unmatched stays local
    assert routing_from_data(None).decide("other") == (True, None)
