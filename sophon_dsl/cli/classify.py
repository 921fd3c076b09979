"""``sophon-dsl classify "REQUEST"``: the planning classifier's score for a request.

``--json`` prints ``{"score", "signals": {name: points}, "plan": true|false}``; without it,
one line per signal that fired with the words that fired it.  Exit 0 either way (the
answer is in the output, not the exit code); 2 for an empty request.
"""

from __future__ import annotations

import argparse
import json

from .common import EXIT_OK, UsageError

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    from ..planning.classifier import PLAN_THRESHOLD, classify

    if not args.request.strip():
        raise UsageError("REQUEST is empty: give the request to score")
    result = classify(args.request)
    if args.json:
        print(json.dumps(result.to_json()))
        return EXIT_OK
    verdict = "plan" if result.plan else "no plan"
    print(f"score {result.score} (plans at {PLAN_THRESHOLD} or more): {verdict}")
    for name, points in result.signals.items():
        print(f"  +{points} {name}: {', '.join(result.evidence.get(name, []))}")
    return EXIT_OK
