"""``sophon-dsl cancel RUN_ID``: cancel a durable run, whichever process holds it (seed 000's
``TryCancelPlan(planId)``), through its store (docs/runtime.md, Cancellation).

A running run's holder polls its store for the request (``durable.session.watch_cancel``) and
cancels the run as ``handle.cancel()`` does in-process: it ends ``cancelled`` and records its
summary.  A run nobody holds (waiting for a person, or interrupted) is marked cancelled here.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE

__all__ = ["run"]

# what a run still counts as while it may be stopped
_OPEN = ("running", "waiting", "interrupted")


def run(args: argparse.Namespace) -> int:
    from .store import find_run, open_cli_store
    from ..durable.report import shown_status

    store = open_cli_store(args.store, create=False)
    try:
        row = find_run("cancel", store, args.run_id)
        if row is None:
            return EXIT_USAGE
        status = shown_status(row)
        if status not in _OPEN:
            print(f"sophon-dsl cancel: run {args.run_id} already ended ({status})", file=sys.stderr)
            return EXIT_FAIL
        reason = args.reason or "cancelled with sophon-dsl cancel"
        request = {"action": "cancel", "reason": reason, "by": f"{socket.gethostname()}:{os.getpid()}",
                   "at": time.time()}
        store.request_cancel(args.run_id, request).result()
        if status != "running":
            # nobody holds it: no process will see the request, so the run ends here (a resume
            # would find the request and stop at once)
            summary = dict(row.get("summary") or {})
            summary.update(status="cancelled", waiting=None,
                           error={"error": "Plan.Cancelled", "cause": reason})
            store.set_status(args.run_id, "cancelled", summary).result()
            print(f"sophon-dsl cancel: run {args.run_id} ({status}) cancelled", file=sys.stderr)
            return EXIT_OK
        print(f"sophon-dsl cancel: asked {row.get('lease_owner')} to cancel run {args.run_id}", file=sys.stderr)
        if args.no_wait:
            return EXIT_OK
        return _wait(store, args.run_id, args.wait)
    finally:
        store.close()


def _wait(store: object, run_id: str, seconds: float) -> int:
    """Until the holder has recorded how the run ended (or ``seconds`` pass)."""
    from ..durable.report import shown_status

    deadline = time.monotonic() + seconds
    while True:
        row = store.get_run(run_id)  # type: ignore[attr-defined]
        status = shown_status(row) if row is not None else "deleted"
        if status != "running":
            print(f"sophon-dsl cancel: run {run_id} ended {status}", file=sys.stderr)
            return EXIT_OK if status == "cancelled" else EXIT_FAIL
        if time.monotonic() >= deadline:
            print(f"sophon-dsl cancel: run {run_id} still running after {seconds:g} s; the request stays "
                  "in the store", file=sys.stderr)
            return EXIT_FAIL
        time.sleep(0.1)
