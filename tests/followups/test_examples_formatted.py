"""Every example plan under examples/ (recursively) is in `sophon-dsl fmt`'s layout.

DSL plans (*.plan, *.sophon, *.dsl) at any depth; the JSON and YAML plans except the seed
004 JSON documents (verbatim copies of the seed, tests/test_seed_examples.py); and the DSL
plans scripted models reply with (examples/agent/, examples/goals/agents.yaml), which the
docs show as what a model writes.  Checked through the CLI, as a user would."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sophon_dsl.cli import main
from sophon_dsl.cli.common import sniff_format

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DSL_PLANS = sorted(p for ext in ("plan", "sophon", "dsl") for p in EXAMPLES.rglob(f"*.{ext}"))
# JSON / YAML files under examples/ that are not plans: an input, tool declarations, the
# scripted replies of models (their DSL replies are checked below)
NOT_PLANS = {"competitors_input.json", "seed004_tools.yaml", "agent/competitors_replies.yaml",
             "goals/agents.yaml", "goals/planner.yaml", "goals/evaluator.yaml", "seed000/replies.yaml"}
# the seeds' own documents, kept as the seeds write them (seed 000's ExecutionPlan, seed 004's)
VERBATIM = {p.relative_to(EXAMPLES).as_posix() for p in (EXAMPLES / "seed004").glob("*.json")} | {"seed000/plan.json"}
DATA_PLANS = sorted(p for ext in ("json", "yaml", "yml") for p in EXAMPLES.rglob(f"*.{ext}")
                    if p.relative_to(EXAMPLES).as_posix() not in NOT_PLANS | VERBATIM)
SCRIPTS = [EXAMPLES / "agent" / "competitors_replies.yaml", EXAMPLES / "goals" / "agents.yaml"]


def _ids(paths):
    return [p.relative_to(EXAMPLES).as_posix() for p in paths]


def test_the_walk_finds_the_nested_examples():
    assert {"competitors.plan", "map.plan", "stdlib/data.plan",
            "seed004/01_plan_two_calls.plan"} <= set(_ids(DSL_PLANS))
    assert {"competitors.json", "competitors.yaml", "map.yaml"} <= set(_ids(DATA_PLANS))


def test_not_plans_lists_files_that_exist():
    assert all((EXAMPLES / name).is_file() for name in NOT_PLANS)


def test_fmt_check_on_the_examples_directory_passes(capsys):
    assert main(["fmt", "--check", str(EXAMPLES)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("plan", DSL_PLANS + DATA_PLANS, ids=_ids(DSL_PLANS + DATA_PLANS))
def test_example_plan_is_formatted(plan, capsys):
    assert main(["fmt", "--check", str(plan)]) == 0, capsys.readouterr().err


def _dsl_replies():
    for script in SCRIPTS:
        data = yaml.safe_load(script.read_text(encoding="utf-8"))
        entries = data["keyed"] if isinstance(data, dict) else data
        for i, entry in enumerate(entries):
            if sniff_format(entry["reply"]) == "dsl":
                yield pytest.param(entry["reply"], id=f"{script.relative_to(EXAMPLES).as_posix()}[{i}]")


@pytest.mark.parametrize("reply", list(_dsl_replies()))
def test_scripted_dsl_reply_is_formatted(reply, tmp_path, capsys):
    path = tmp_path / "reply.plan"
    path.write_text(reply, encoding="utf-8")
    assert main(["fmt", "--check", str(path)]) == 0, reply
