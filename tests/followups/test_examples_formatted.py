"""Every example plan is already in `sophon-dsl fmt`'s layout (`fmt --check` passes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sophon_dsl.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLANS = sorted(str(p) for p in EXAMPLES.glob("*.plan"))


@pytest.mark.parametrize("plan", PLANS, ids=[Path(p).relative_to(EXAMPLES).as_posix() for p in PLANS])
def test_example_plan_is_formatted(plan, capsys):
    assert main(["fmt", "--check", plan]) == 0, capsys.readouterr().err
