"""The heuristic complexity classifier, exactly by seed 000's table, and `sophon-dsl classify`."""

from __future__ import annotations

import json

import pytest

from sophon_dsl.cli import main
from sophon_dsl.planning.classifier import ACTION_VERBS, classify

ACME = ("Search my emails for the invoice from Acme, then create a Jira ticket with the amount and send "
        "a summary to the team Slack channel")
CALENDAR = ("Check my Google Calendar for meetings tomorrow, draft a preparation email for each meeting with "
            "relevant context from my Confluence pages, and create a Jira ticket to review the quarterly report")
COMPETITORS = "research three competitors, build a comparison spreadsheet, and email it to my team"


def test_seed_worked_examples_score_what_the_table_gives_not_what_the_seed_says():
    assert classify("What's the weather?").to_json() == {"score": 0, "signals": {}, "plan": False}
    # seed 001 says "score 5+"; its own table gives 4 (length, "then", three verbs)
    assert classify(ACME).to_json() == {
        "score": 4, "signals": {"length": 1, "conjunction": 2, "action_verbs": 1}, "plan": True}
    # seed 001 calls it Complex; the table gives 2: no conjunction of the list, no multi-step word
    assert classify(CALENDAR).to_json() == {
        "score": 2, "signals": {"length": 1, "action_verbs": 1}, "plan": False}
    # seed 000's opening example ("research, build, email") scores 1
    assert classify(COMPETITORS).score == 1


@pytest.mark.parametrize("text, signals", [
    ("x" * 100, {}),                                        # exactly 100: not longer than 100
    ("x" * 101, {"length": 1}),
    ("do it and then stop", {"conjunction": 2}),
    ("after that, rest", {"conjunction": 2}),
    ("First things", {"conjunction": 2}),
    ("THEN", {"conjunction": 2}),
    ("first do a then b, and then c", {"conjunction": 2}),  # +2 once however many
    ("strengthen the wall", {}),                            # no "then" inside a word
    ("firstly", {}), ("thence", {}), ("afterthat", {}),
    ("make a plan", {"multi_step": 2}),
    ("three Steps in SEQUENCE", {"multi_step": 2}),
    ("the planet", {}), ("one step", {}), ("planning", {}),
    ("search and create", {"action_verbs": 1}),
    ("search, search again", {}),                           # two distinct verbs are needed
    ("searches and created", {}),                           # base forms only
    ("Send it, WRITE it", {"action_verbs": 1}),
])
def test_table_boundaries(text, signals):
    got = classify(text)
    assert got.signals == signals
    assert got.score == sum(signals.values())


def test_threshold_is_three_and_the_seed_verbs_are_listed():
    assert classify("plan: search and create").to_json() == {
        "score": 3, "signals": {"multi_step": 2, "action_verbs": 1}, "plan": True}
    assert not classify("make a plan").plan
    assert {"search", "create", "send", "write"} <= set(ACTION_VERBS)


def test_cli_classify_json_and_text(capsys):
    assert main(["classify", ACME, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "score": 4, "signals": {"length": 1, "conjunction": 2, "action_verbs": 1}, "plan": True}
    assert main(["classify", "What's the weather?", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"score": 0, "signals": {}, "plan": False}
    assert main(["classify", ACME]) == 0
    out = capsys.readouterr().out
    assert out.startswith("score 4 (plans at 3 or more): plan")
    assert "+2 conjunction: then" in out
    assert main(["classify", "  "]) == 2
    assert "REQUEST is empty" in capsys.readouterr().err
