"""W301 and W302 around branching output paths (issue 10, item 19): writers needing
different alternatives of one branch never race, the catch (last) alternative needs no
reader, and the real races and unread alternatives are still reported."""

from __future__ import annotations

import subprocess
import sys

import pytest

import sophon_dsl
from sophon_dsl import ToolSpec

ACTIVITY = {"latent": False}  # branching activities: a latent one collapses in eager mode (W401)


def _impl(**kwargs):
    return None


def tools(*activities: str):
    names = ["getWeather", "isItSunny", "isItWarm", "findPark", "findMovie", "findCafe", "describe",
             "presentSuggestion", "processPayment", "confirmOrder"]
    return [ToolSpec(n, "", {"type": "object"}, None, func=_impl if n in activities else None) for n in names]


TOOLS = tools("isItSunny", "isItWarm", "processPayment", "confirmOrder")


def warnings(text: str) -> list[tuple[str, int]]:
    plan = sophon_dsl.loads(text)
    return sorted((d.code, d.line) for d in sophon_dsl.check(plan, tools=TOOLS, stdlib=False)
                  if d.code in ("W301", "W302"))


WEATHER = """\
$state.weather = getWeather(city="Paris")
$state.sunny || $state.notSunny = isItSunny(weather=$state.weather)
$state.suggestion = findPark(when=$state.sunny)
$state.suggestion = findMovie(when=$state.notSunny)
presentSuggestion(s=$state.suggestion)
"""


def test_weather_diagram_writers_are_exclusive():
    assert warnings(WEATHER) == []


@pytest.mark.parametrize("plan", [
    # through a chain of readers
    """$state.sunny || $state.notSunny = isItSunny(city="Paris")
$state.park = findPark(when=$state.sunny)
$state.suggestion = describe(p=$state.park)
$state.suggestion = findMovie(when=$state.notSunny)
presentSuggestion(s=$state.suggestion)
""",
    # through @after
    """$state.sunny || $state.notSunny = isItSunny(city="Paris")
park: $state.park = findPark(when=$state.sunny)
@after(park) $state.suggestion = describe(p="a park")
$state.suggestion = findMovie(when=$state.notSunny)
presentSuggestion(s=$state.suggestion, p=$state.park)
""",
    # a path and a path below it
    """$state.sunny || $state.notSunny = isItSunny(city="Paris")
$state.plan = findPark(when=$state.sunny)
$state.plan.movie = findMovie(when=$state.notSunny)
presentSuggestion(s=$state.plan)
""",
    # reading below an alternative, in a gate
    """$state.day.sunny || $state.day.notSunny = isItSunny(city="Paris")
$state.suggestion = findPark(when=$state.day.sunny.hours && $input.x)
$state.suggestion = findMovie(when=$state.day.notSunny)
presentSuggestion(s=$state.suggestion)
""",
], ids=["chain", "after", "prefix", "gate"])
def test_exclusive_writers(plan):
    assert warnings(plan) == []


@pytest.mark.parametrize("plan, line", [
    ("""$state.sunny || $state.notSunny = isItSunny(city="Paris")
$state.suggestion = findPark(when=$state.sunny)
$state.suggestion = findMovie(when=$state.notSunny)
$state.suggestion = findCafe(city="Paris")
presentSuggestion(s=$state.suggestion)
""", 4),
    ("""$state.sunny || $state.notSunny = isItSunny(city="Paris")
$state.suggestion = findPark(when=$state.sunny)
$state.suggestion = findCafe(when=$state.sunny)
presentSuggestion(s=$state.suggestion, n=$state.notSunny)
""", 3),
    ("""$state.sunny || $state.notSunny = isItSunny(city="Paris")
$state.warm || $state.cold = isItWarm(city="Paris")
$state.suggestion = findPark(when=$state.sunny)
$state.suggestion = findMovie(when=$state.cold)
presentSuggestion(s=$state.suggestion, a=$state.notSunny, b=$state.warm)
""", 4),
    ("""$state.sunny || $state.notSunny = isItSunny(city="Paris")
$state.suggestion = findPark(when=$state.sunny || $input.day)
$state.suggestion = findMovie(when=$state.notSunny)
presentSuggestion(s=$state.suggestion)
""", 3),
    ("""$state.day.sunny || $state.day.notSunny = isItSunny(city="Paris")
$state.suggestion = findPark(when=$state.day)
$state.suggestion = findMovie(when=$state.day.notSunny)
presentSuggestion(s=$state.suggestion)
""", 3),
    # a second writer of the path that one alternative's reader depends on
    ("""$state.sunny || $state.notSunny = isItSunny(city="Paris")
$state.sunny = getWeather(city="Paris")
$state.suggestion = findPark(when=$state.sunny)
$state.suggestion = findMovie(when=$state.notSunny)
presentSuggestion(s=$state.suggestion)
""", 4),
], ids=["outside", "same-alternative", "two-branches", "fallback", "both-alternatives", "other-writer"])
def test_races_still_reported(plan, line):
    assert ("W301", line) in warnings(plan)


def test_exclusive_pair_does_not_hide_a_race_behind_it():
    plan = """$state.sunny || $state.notSunny = isItSunny(city="Paris")
$state.suggestion = findPark(when=$state.sunny)
$state.suggestion && $state.done = findMovie(when=$state.notSunny)
$state.suggestion = findCafe(after=$state.done || $input.now)
presentSuggestion(s=$state.suggestion)
"""
    # the cafe search waits for the movie one (its fallback may fall through, so it runs
    # on either branch) but not for the park one: that race is reported
    assert warnings(plan) == [("W301", 4)]


def test_catch_alternative_needs_no_reader():
    plan = """$state.receipt || $state.error = processPayment(amount=1)
confirmOrder(receipt=$state.receipt)
"""
    assert warnings(plan) == []


def test_unread_alternatives_before_the_last_still_warn():
    three = """$state.ok || $state.retry || $state.error = processPayment(amount=1)
confirmOrder(receipt=$state.ok)
"""
    assert warnings(three) == [("W302", 1)]
    unread = '$state.receipt || $state.error = processPayment(amount=1)\nconfirmOrder(e=$state.error)\n'
    (d,) = [d for d in sophon_dsl.check(sophon_dsl.loads(unread), tools=TOOLS, stdlib=False) if d.code == "W302"]
    assert "†state.receipt" in d.message


def test_cli_check_weather_diagram(tmp_path):
    path = tmp_path / "weather.plan"
    path.write_text(WEATHER, encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "sophon_dsl", "check", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert "W301" not in out.stdout + out.stderr


def test_a_race_behind_an_exclusive_pair_is_reported_once():
    lines = ["$state.a || $state.b = isItSunny(i=1)", "$state.x && $state.y0 = findPark(v=$state.a)",
             "$state.x && $state.y1 = findMovie(v=$state.b)"]
    lines += [f"$state.x && $state.y{i} = describe(p=$state.y{i - 1} || $input.z)" for i in range(2, 40)]
    lines.append("presentSuggestion(s=$state.x, y=$state.y39)")
    assert warnings("\n".join(lines) + "\n") == [("W301", 4)]  # the fallback reader races findPark
