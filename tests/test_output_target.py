"""OutputTarget owns what ``||`` and ``&&`` mean on an output path (issue 27, item 3):
the readers, the checks, the scheduler and the reference interpreter all ask it."""

from __future__ import annotations

import pytest

from sophon_dsl import loads
from sophon_dsl.model import OutputMethod, OutputTarget, Reference

A, B, C = Reference("state", ("a",)), Reference("state", ("b",)), Reference("state", ("c",))


def test_of_drops_the_operator_of_one_path_and_defaults_the_method() -> None:
    t = OutputTarget.of((A,), "||")
    assert t.op is None and t.method is OutputMethod.SET
    assert OutputTarget.of((A, B), "&&", OutputMethod.PUSH).method is OutputMethod.PUSH


@pytest.mark.parametrize("text, expected", [
    ("†a", (None, ["†a"])),
    (" †a ||  †b ", ("||", ["†a", "†b"])),
    ("†a&&†b&&†c", ("&&", ["†a", "†b", "†c"])),
    ("†a || †b && †c", None),
])
def test_split(text: str, expected) -> None:
    assert OutputTarget.split(text) == expected


def test_branching_targets_and_catch() -> None:
    t = OutputTarget.of((A, B, C), "||")
    assert t.is_branching and not t.fans_out
    assert t.targets() == (A,) and t.targets(1) == (B,)
    assert t.catch == C and [t.is_catch(k) for k in range(3)] == [False, False, True]


def test_fan_out_writes_every_path_and_has_no_catch() -> None:
    t = OutputTarget.of((A, B), "&&")
    assert t.fans_out and not t.is_branching
    assert t.targets() == (A, B) and t.catch is None and not t.is_catch(1)


def test_one_path_hands_out_its_own_tuple() -> None:
    t = OutputTarget.of((A,))
    assert t.targets() is t.paths and t.catch is None


@pytest.mark.parametrize("target, expected", [
    (0, 0), (2, 2), (3, None), (-1, None), (True, None), ("†state.b", 1), ("$state.c", 2), ("state.x", None),
])
def test_pick_names_an_alternative(target, expected) -> None:
    assert OutputTarget.of((A, B, C), "||").pick(target) == expected


def test_pick_of_a_fan_out_is_only_its_first_path() -> None:
    t = OutputTarget.of((A, B), "&&")
    assert t.pick(0) == 0 and t.pick(1) is None and t.pick("†state.b") is None


def test_text_round_trips_through_the_dsl() -> None:
    plan = loads("†state.ok || †state.err = f(x=1)\n†state.a && †state.b += g()\n", format="dsl")
    assert [c.output.text() for c in plan.calls] == ["†state.ok || †state.err", "†state.a && †state.b"]
    assert plan.calls[0].output.holds(Reference("state", ("err",)))
