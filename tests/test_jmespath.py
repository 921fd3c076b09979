"""JMESPath in references (issue 12): spelling in the three forms, evaluation, the reference
interpreter's agreement, compile once, edges from the path before the expression."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings, strategies as st

from sophon_dsl import compiler, dumps, loads
from sophon_dsl.model import Reference
from sophon_dsl.refs import compile_reference_query, parse_reference, parse_string_value
from sophon_dsl.runtime import arun
from sophon_dsl.runtime.reference import areference_run
from sophon_dsl.tools import ToolSpec

QUERIES = ["[*].url", "[-1]", "[-1].url", "[1:]", "[:2].rank", "[::2]", "[?rank > `1`].url",
           "[?url == 'b']", "[]", "[0].url", "| length(@)", "| [0].url", "[*].[url, rank]",
           "| sort_by(@, &rank)[-1].url", ".*", "[?rank > `1` && url != 'c'].rank"]


def test_spellings_and_the_model():
    ref = parse_string_value("†state.orders[?total > `100`].id")
    assert ref == Reference("state", ("orders",), None, "[?total > `100`].id")
    assert ref.key == ("state", "orders")  # the path before the expression wires the edges
    assert parse_string_value("†state.a[0].b") == Reference("state", ("a", 0, "b"))  # plain stays plain
    assert parse_string_value("†{state.items | [0]}").text() == "†{state.items | [0]}"
    assert parse_reference("$state.hits[*].url", None, "†$").text("$") == "$state.hits[*].url"
    # text after a reference that is no JMESPath bracket stays text
    assert parse_string_value("†state.a[note]").parts[1] == "[note]"  # type: ignore[union-attr]


@given(st.sampled_from(QUERIES), st.sampled_from(["hits", "a.b", "x[0]"]), st.sampled_from(["dsl", "json", "yaml"]))
def test_every_form_prints_and_reads_back_the_same_reference(query, path, form):
    text = "†{state." + path + (" " if query[0] == "|" else "") + query + "}"
    ref = parse_string_value(text)
    plan = loads(f"use(x=${text[1:]}, t=\"see {text} here\", e=${text[1:]} || $state.z)")
    again = loads(dumps(plan, form), form)
    assert again == plan
    assert again.calls[0].params[0].value == ref


def test_the_name_shorthand_is_not_printed_for_an_expression():
    plan = loads("f(hits=$state.hits[*].url, items=$state.items)")
    assert dumps(plan) == "f(hits=$state.hits[*].url, $state.items)\n"
    assert loads(dumps(plan)) == plan


def test_compiled_once_per_expression():
    assert compile_reference_query("[?a > `1`].b") is compile_reference_query("[?a > `1`].b")


TOOLS = [ToolSpec("search", "", None, None, func=lambda q=None: None)]


def test_edges_and_types_come_from_the_path_before_the_expression():
    plan = loads('†state.hits = search(q="x")\nuse(u=$state.hits[*].url)\n')
    compiled = compiler.compile_plan(plan, [*TOOLS, ToolSpec("use", "", None, None, func=lambda **k: None)])
    assert compiled.deps[1] == frozenset({0})
    assert compiled.ok


# --------------------------------------------------------------------------- agreement

_item = st.fixed_dictionaries({"url": st.sampled_from(["a", "b", "c"]), "rank": st.integers(0, 3)})


@st.composite
def plans(draw):
    n = draw(st.integers(1, 3))
    lines, results = [], {}
    for k in range(n):
        results[f"w{k}"] = draw(st.lists(_item, max_size=4))
        lines.append(f'†state.l{k} = produce(key="w{k}")')
    for r in range(draw(st.integers(1, 4))):
        k = draw(st.integers(0, n - 1))
        q = draw(st.sampled_from(QUERIES))
        ref = parse_string_value(f"†{{state.l{k} {q}}}").text("$")  # bare when it can be
        other = draw(st.integers(0, n - 1))
        lines.append(f'consume(key="r{r}", v={ref}, t="<†{{state.l{other}[-1]}}>", '
                     f'f=$state.l{k}[?rank > `2`] || $state.l{other})')
    lines.append(f"return {{\"o\": ${{state.l{n - 1} | [*].url}}}}")
    return loads("\n".join(lines)), results


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_scheduler_and_reference_interpreter_agree(case):
    plan, results = case

    def tools(seen):
        async def produce(key):
            return results[key]

        async def consume(key, v=None, t=None, f=None):
            seen[key] = (v, t, f)
            return None

        return [ToolSpec("produce", "", None, None, func=produce), ToolSpec("consume", "", None, None, func=consume)]

    async def both():
        a_seen, b_seen = {}, {}
        a = await arun(plan, tools(a_seen), validate_input=False)
        b = await areference_run(plan, tools(b_seen))
        return a, a_seen, b, b_seen

    a, a_seen, b, b_seen = asyncio.run(both())
    # (a plain path such as [0].url still has no value in an empty list: the call fails in both)
    assert a.status == b.status, (dumps(plan), [(c.id, c.status, c.error) for c in a.calls])
    assert [c.status for c in a.calls] == [c.status for c in b.calls]
    assert a_seen == b_seen
    assert a.output == b.output


def test_an_expression_on_a_map_item_is_kept():
    """A map body's reference to its item keeps its JMESPath expression, in the scheduler, the
    reference interpreter and the checks."""
    plan = loads('$state.out = map($input.rows, as=row) {\n'
                 '    $local.x = pick(last=$row.tags[-1], n=${row.tags | length(@)})\n'
                 '    return $local.x\n'
                 '}\n')

    async def pick(last, n):
        return {"last": last, "n": n}

    tools = [ToolSpec("pick", "", None, None, func=pick)]
    rows = {"rows": [{"tags": ["a", "b"]}, {"tags": ["c"]}]}
    want = [{"last": "b", "n": 2}, {"last": "c", "n": 1}]
    assert compiler.compile_plan(plan, tools).ok
    got = asyncio.run(arun(plan, tools, input=rows, validate_input=False))
    assert got.status == "succeeded", got.error
    assert got.state["state"]["out"] == want
    ref = asyncio.run(areference_run(plan, tools, input=rows))
    assert ref.state["state"]["out"] == want
