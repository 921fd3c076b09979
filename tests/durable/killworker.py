"""The process the kill -9 test starts (and kills): ``run`` or ``resume`` a seeded plan on a
SQLite file (or a PostgreSQL
URL given instead of its path); prints the comparable result as JSON when it gets to the end."""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sophon_dsl
from durable import plans


def main() -> None:
    action, db, seed, run_id = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    url = db if db.startswith("postgresql://") else f"sqlite:///{db}"
    # warm up what the first call would load (schemas, validators, the thread pool), so that
    # the kill window is the calls' own time, as in the calibration run
    ledger, plans.LEDGER = plans.LEDGER, None  # (not in the side-effect ledger)
    sophon_dsl.run("$state.a = look(n=1)\n$state.b = act(n=1)\n", tools=plans.TOOLS)
    plans.LEDGER = ledger
    t_go = [0.0]

    def on_event(event) -> None:
        if event.type == "plan_start":  # checked and registered: the kill window starts here
            t_go[0] = time.perf_counter()
            print("go", file=sys.stderr, flush=True)

    if action == "run":
        result = sophon_dsl.run(plans.seeded_plan(seed, maps=True), tools=plans.TOOLS, input={"zero": 0}, store=url,
                                run_id=run_id, on_event=on_event)
    elif action == "resume":
        result = sophon_dsl.resume(run_id, store=url, tools=plans.TOOLS, unknown="rerun", on_event=on_event)
    else:  # "plain": no store (the reference)
        result = sophon_dsl.run(plans.seeded_plan(seed, maps=True), tools=plans.TOOLS, input={"zero": 0},
                                on_event=on_event)
    t_go = t_go[0]
    # when the calls ran, from "go" (the kill test calibrates its kill window on it)
    started = [c.started for c in result.calls if c.started is not None]
    ended = [c.ended for c in result.calls if c.ended is not None]
    if started:
        print(json.dumps({"window": [min(started) - t_go, max(ended) - t_go]}))
    print(json.dumps(plans.comparable(result)))


if __name__ == "__main__":
    main()
