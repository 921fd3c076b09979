"""The call gate, as a property (issue 24): for random plans with maps (nested, of counts
known before the run or only during it) and risky tools, the calls asked about are exactly
the risky calls that can run, and with the answer "no" no risky tool ever runs."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sophon_dsl import run, tool
from sophon_dsl.runtime.gate import template_id
from sophon_dsl.tools import as_registry

RAN: list[str] = []


def _make(name: str, risk: str):
    @tool(name=name, risk=risk)
    def body(x: int = 0) -> int:
        RAN.append(name)
        return x

    return body


TOOLS = as_registry([_make("safe", "low"), _make("pay", "high"), _make("mail", "medium")], stdlib=False)


@tool(name="count")
def count(n: int) -> list[int]:
    return list(range(n))


REGISTRY = as_registry([*TOOLS.values(), count], stdlib=False)
RISKY = {"pay", "mail"}


@st.composite
def bodies(draw, depth: int, kind: str, prefix: str, counter: list) -> tuple[list[str], set[str]]:
    """Lines of a body (or the plan), and the template ids of its risky calls."""
    lines: list[str] = []
    risky: set[str] = set()
    for _ in range(draw(st.integers(1, 3))):
        counter[0] += 1
        label = f"k{counter[0]}"
        if depth < 2 and draw(st.booleans()):
            n = draw(st.integers(0, 3))
            known = draw(st.booleans())
            inner, inner_risky = draw(bodies(depth + 1, "local", f"{prefix}{label}[*].", counter))
            if known:
                over = f"over={list(range(n))}"
            else:  # a list made during the run: its count is unknown to the plan gate
                counter[0] += 1
                src = f"k{counter[0]}"
                lines.append(f"{src}: ${kind}.{src} = count(n={n})")
                over = f"${kind}.{src}"
            lines.append(f"{label}: ${kind}.{label} = map({over}, as=it{depth}) {{")
            lines.extend("  " + line for line in inner)
            lines.append("}")
            risky |= inner_risky
        else:
            name = draw(st.sampled_from(["safe", "pay", "mail"]))
            lines.append(f"{label}: ${kind}.{label} = {name}(x=1)")
            if name in RISKY:
                risky.add(f"{prefix}{label}")
    return lines, risky


@st.composite
def plans(draw) -> tuple[str, set[str]]:
    lines, risky = draw(bodies(0, "state", "", [0]))
    return "\n".join(lines) + "\n", risky


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_the_calls_asked_about_are_the_risky_calls_that_can_run(case):
    text, risky = case
    shown: set[str] = set()
    asked_calls: set[str] = set()

    def approver(request):
        for c in request.calls:
            (shown if request.kind == "plan" else asked_calls).add(template_id(c["id"]))
        return True

    RAN.clear()
    result = run(text, tools=REGISTRY, approve=approver)
    assert result.status == "succeeded", (text, result.error)
    # the plan gate shows every risky call the plan may run, map bodies included, nothing else
    assert shown == risky, text
    ran_risky = {template_id(c.id) for c in result.calls if c.tool in RISKY and c.status == "succeeded"}
    assert ran_risky <= shown, text
    # a second question only for a map whose count the plan gate could not know
    assert asked_calls <= risky, text

    RAN.clear()
    refused = run(text, tools=REGISTRY, approve=False)
    assert not [name for name in RAN if name in RISKY], text
    assert refused.status == ("rejected" if risky else "succeeded"), text
