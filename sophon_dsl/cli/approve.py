"""``sophon-dsl approve RUN_ID [--reject] [--reason TEXT]``: answer what a waiting run waits
for (stored with the run), then continue it here."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_FAIL, EXIT_USAGE

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    from ..durable.clistore import open_cli_store
    from .resume import continue_run

    store = open_cli_store(args.store)
    try:
        row = store.get_run(args.run_id)
        if row is None:
            print(f"sophon-dsl approve: error: no run {args.run_id!r} in {store.url}", file=sys.stderr)
            return EXIT_USAGE
        waiting = (row.get("summary") or {}).get("waiting")
        if row["status"] != "waiting" or not waiting:
            print(f"sophon-dsl approve: run {args.run_id} is not waiting for approval (status {row['status']})",
                  file=sys.stderr)
            return EXIT_FAIL
        decision = {"action": "reject" if args.reject else "approve",
                    "reason": args.reason or ("rejected" if args.reject else "approved") + " with sophon-dsl approve"}
        # (an agent run's decision belongs to the turn that asked: its own run id, t{n})
        store.put_decision(waiting.get("decision_run") or args.run_id, waiting["decision"], decision).result()
        if waiting.get("kind") == "goal":     # a goal waiting for a person (docs/goals.md)
            from .goal import continue_goal

            return continue_goal(args, store, row)
        # further decisions the run needs leave it waiting again; calls in doubt fail (catchable)
        return continue_run(args, store, "wait", "fail")
    finally:
        store.close()
