"""Issue 17, High 3: math.eval bounds every operation's result before computing it.

Each expression runs in a worker thread joined with a generous limit: on the code before
the fix these ran for minutes holding the GIL (a hang guard, not a timing assertion).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import sophon_dsl
from stdlib_tools.errors import ToolError
from stdlib_tools.math import safe_eval

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hang_guard import finishes


def _finishes(fn: Any, limit: float = 60.0) -> Any:
    return finishes(fn, limit, "still computing: the result was not bounded before the work")


@pytest.mark.parametrize("expression", [
    "round(7, -1000000000)",
    "round(7.5, -100000000000)",
    "round(7, -10000000000000000000000)",
])
def test_round_with_huge_ndigits_is_refused_before_computing(expression):
    with pytest.raises(ToolError) as info:
        _finishes(lambda: safe_eval(expression))
    assert info.value.code == "Math.Overflow"


def test_round_still_rounds():
    assert safe_eval("round(1234.5678, 2)") == 1234.57
    assert safe_eval("round(1234, -2)") == 1200
    assert safe_eval("round(7, -1000)") == 0


@pytest.mark.parametrize("expression", [
    "2 ** 1000 * 2 ** 1000 * 2 ** 1000 * 2 ** 1000 * 2 ** 1000",
    "(2 ** 4000 + 2 ** 4000) * 2",
])
def test_integer_growth_is_bounded(expression):
    with pytest.raises(ToolError) as info:
        safe_eval(expression)
    assert info.value.code == "Math.Overflow"


def test_round_bomb_through_a_plan_fails_its_call():
    result = _finishes(lambda: sophon_dsl.run('†state.x = math.eval(expression="round(7, -1000000000)")\n'))
    assert result.status == "failed"
    assert result.calls[0].error.error == "Math.Overflow"
