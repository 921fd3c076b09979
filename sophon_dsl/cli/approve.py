"""``sophon-dsl approve RUN_ID [--reject] [--reason TEXT]``: answer what a waiting run waits
for (stored with the run), then continue it here."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_FAIL, EXIT_USAGE

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    from .store import find_run, open_cli_store, stored_config
    from ..durable.report import shown_text, waiting_lines, waiting_view
    from ..durable.session import shown
    from .resume import continue_run

    store = open_cli_store(args.store, create=False)
    try:
        row = find_run("approve", store, args.run_id)
        if row is None:
            return EXIT_USAGE
        waiting = (row.get("summary") or {}).get("waiting")
        # (a record without the decision's name, as only an edited row has, is not waiting either)
        if row["status"] != "waiting" or not isinstance(waiting, dict) or not isinstance(waiting.get("decision"), str):
            print(f"sophon-dsl approve: run {args.run_id} is not waiting for approval (status {row['status']})",
                  file=sys.stderr)
            return EXIT_FAIL
        # the configuration the run continues with is checked before the decision is stored:
        # a row that cannot vouch for its tools is refused with nothing stored or imported
        stored_config(args, row)
        waiting = waiting_view(waiting, _stored_plan(row))
        what = "rejecting" if args.reject else "approving"
        print(f"sophon-dsl approve: {what} {shown_text(waiting.get('decision'), 200)} of run {args.run_id}:",
              file=sys.stderr)
        for line in waiting_lines(waiting):  # what is approved, as the prompt would show it
            print("  " + line, file=sys.stderr)
        decision = {"action": "reject" if args.reject else "approve",
                    "reason": args.reason or ("rejected" if args.reject else "approved") + " with sophon-dsl approve",
                    # the approval covers what was shown, no more (a resume after a risk rose asks again)
                    "shown": shown(waiting.get("calls") or ())}
        # (an agent run's decision belongs to the turn that asked: its own run id, t{n})
        store.put_decision(waiting.get("decision_run") or args.run_id, waiting["decision"], decision).result()
        if waiting.get("kind") == "goal":     # a goal waiting for a person (docs/goals.md)
            from .goal import continue_goal

            return continue_goal(args, store, row)
        # further decisions the run needs leave it waiting again; calls in doubt fail (catchable)
        return continue_run(args, store, "wait", "fail")
    finally:
        store.close()


def _stored_plan(row: dict) -> object:
    """A plan run's stored plan (for a waiting record kept before it held the arguments), else None."""
    spec = row.get("spec") or {}
    if spec.get("kind") or not isinstance(spec.get("plan"), str):
        return None
    from ..durable.planload import load_stored_plan

    try:
        return load_stored_plan(spec["plan"])
    except Exception:  # noqa: BLE001 - the arguments are then not shown; the resume reports the plan
        return None
