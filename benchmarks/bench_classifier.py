"""Planning classifier cost (issue 15): microseconds per request, target <= 50 us.

Requests of several sizes (a short question, the seed's two worked examples, a 2,000-character
request, a 20,000-character pasted document) are each scored ``--loops`` times with
``sophon_dsl.planning.classify``; the best of ``--repeat`` runs is reported.  Side by side, as a
floor, ``str.lower()`` plus one ``in`` test per phrase of the table (no word boundaries: what the
regular expressions add over the cheapest possible scan).

Wall times on a shared machine are noisy: the verdict column is informational and the script
always exits 0.

Run: python benchmarks/bench_classifier.py [--loops 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import timeit

from sophon_dsl.planning import classify
from sophon_dsl.planning.classifier import ACTION_VERBS, CONJUNCTIONS, MULTI_STEP_WORDS

TARGET_US = 50.0
ACME = ("Search my emails for the invoice from Acme, then create a Jira ticket with the amount and send "
        "a summary to the team Slack channel")
CALENDAR = ("Check my Google Calendar for meetings tomorrow, draft a preparation email for each meeting with "
            "relevant context from my Confluence pages, and create a Jira ticket to review the quarterly report")
FILLER = "The quarterly numbers strengthen our position in every region we track closely. "
REQUESTS = {
    "short question": "What's the weather?",
    "seed Acme (130 chars)": ACME,
    "seed calendar (194 chars)": CALENDAR,
    "2,000 chars": (FILLER * 30)[:1950] + " then send it",
    "20,000 chars": (FILLER * 300)[:20000],
}
_PHRASES = CONJUNCTIONS + MULTI_STEP_WORDS + ACTION_VERBS


def naive(request: str) -> int:
    text = request.lower()
    return sum(1 for p in _PHRASES if p in text)


def per_call_us(fn, arg, loops: int, repeat: int) -> float:
    return min(timeit.repeat(lambda: fn(arg), number=loops, repeat=repeat)) / loops * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loops", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"{'request':28} {'classify us':>12} {'naive us':>10} {'ratio':>7}  verdict (<= {TARGET_US:g} us)")
    for name, text in REQUESTS.items():
        loops = max(10, args.loops // max(1, len(text) // 1000))
        ours = per_call_us(classify, text, loops, args.repeat)
        floor = per_call_us(naive, text, loops, args.repeat)
        verdict = "ok" if ours <= TARGET_US else "over"
        print(f"{name:28} {ours:12.2f} {floor:10.2f} {ours / floor:7.2f}  {verdict}")


if __name__ == "__main__":
    main()
