"""``sophon-dsl runs list|show|delete|prune``: the runs recorded in a store."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, UsageError

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    from .store import open_cli_store

    store = open_cli_store(args.store, create=False)
    try:
        if args.runs_command == "list":
            return _list(store, args)
        if args.runs_command == "delete":
            return _delete(store, args)
        if args.runs_command == "prune":
            return _prune(store, args)
        return _show(store, args)
    finally:
        store.close()


def _delete(store, args: argparse.Namespace) -> int:
    from ..durable.base import StoreError, display_url

    try:
        gone = store.delete_runs(args.run_ids)
    except StoreError as exc:
        print(f"sophon-dsl runs delete: error: {exc}; nothing was deleted", file=sys.stderr)
        return EXIT_FAIL
    missing = [r for r in dict.fromkeys(args.run_ids) if r not in gone]
    if args.json:
        print(json.dumps({"deleted": gone, "missing": missing}, indent=2))
    else:
        print(f"{len(gone)} run(s) deleted from {display_url(store.url)}", file=sys.stderr)
        for r in missing:
            print(f"  no run {r!r}", file=sys.stderr)
    return EXIT_USAGE if missing else EXIT_OK  # (a missing run: as `runs show` does)


def _prune(store, args: argparse.Namespace) -> int:
    from ..durable import parse_age
    from ..durable.base import StoreError, display_url

    try:
        age = parse_age(args.older_than)
    except ValueError as exc:
        raise UsageError(f"--older-than: {exc}") from None
    try:
        gone = store.prune_runs(age, args.status)
    except StoreError as exc:
        print(f"sophon-dsl runs prune: error: {exc}; nothing was deleted", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print(json.dumps({"deleted": gone}, indent=2))
    else:
        print(f"{len(gone)} run(s) deleted from {display_url(store.url)}", file=sys.stderr)
    return EXIT_OK


def _list(store, args: argparse.Namespace) -> int:
    from ..durable.report import run_summary

    # `interrupted` is a shown status: a `running` row nobody runs any more (report.shown_status)
    wanted = "running" if args.status == "interrupted" else args.status
    listed = store.list_runs(status=wanted)
    if args.status in ("running", "interrupted"):
        from ..durable.report import shown_status

        listed = [r for r in listed if shown_status(r) == args.status]
    counts = store.count_calls(r["run_id"] for r in listed)
    rows = [run_summary(r, counts.get(r["run_id"], 0)) for r in listed]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return EXIT_OK
    for r in rows:
        what = r["goal"] or r["plan_id"] or ""
        where = f"{_safe(os.path.basename(r['file']))}  " if r.get("file") else ""
        calls = r["calls"]
        n = f"{calls['recorded']}/{calls['total']} calls" if calls["total"] is not None else \
            f"{calls['recorded']} calls"
        print(f"{_safe(r['run_id'])}  {r['status']:<11}  {r['created']}  {where}{n}  {_safe(what)}".rstrip())
    if not rows:
        print("no runs recorded" + (f" with status {args.status}" if args.status else ""), file=sys.stderr)
    return EXIT_OK


def _show(store, args: argparse.Namespace) -> int:
    from ..durable.report import stored_result
    from .store import find_run

    row = find_run("runs show", store, args.run_id)
    if row is None:
        return EXIT_USAGE
    if (row.get("spec") or {}).get("kind") == "goal":
        return _show_goal(row, args)
    if (row.get("spec") or {}).get("kind") == "agent":
        return _show_agent(store, row, args)
    data = stored_result(store, row, with_log=args.log)
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        return EXIT_OK
    print(f"run {data['run_id']}: {data['status']}")
    items: dict[str, list] = {}
    for it in data.get("items") or ():
        items.setdefault(it["id"].split("[", 1)[0], []).append(it)
    for c in data["calls"]:
        extra = " (in doubt: started, outcome unknown)" if c.get("in_doubt") else ""
        err = f" {_safe(c['error']['error'])}: {_safe(c['error'].get('cause'))}" if c.get("error") else ""
        mine = items.get(c["id"], [])
        done = sum(1 for it in mine if not it["in_doubt"])
        progress = f" ({done} item call(s) recorded)" if mine else ""
        print(f"  {_safe(c['id'])}: {_safe(c['tool'])} {c['status']}{extra}{err}{progress}")
        for it in mine:  # per-item progress of a map (a run cut mid-map shows where it was)
            doubt = " (in doubt: started, outcome unknown)" if it["in_doubt"] else ""
            ierr = f" {_safe(it['error']['error'])}" if it.get("error") else ""
            print(f"    {_safe(it['id'])}: {it['status']}{doubt}{ierr}")
    if data["waiting"]:
        from ..durable.report import waiting_lines

        print(f"  waiting for approval ({_safe(data['waiting'].get('decision'))}): sophon-dsl approve {data['run_id']}")
        for line in waiting_lines(data["waiting"]):  # what is being approved: nobody approves blind
            print("    " + line)
    print(_json(data["state"]))
    if args.log:
        for m in data["log"]:
            path = ''.join('.' + str(p) for p in m['path'])
            print(f"  #{m['seq']} {_safe(m['call'] or '-')}: {_safe(m['kind'] + path)} "
                  f"{m['method']} {_safe(json.dumps(m['value'], ensure_ascii=False, default=str))}")
    return EXIT_OK


def _safe(text: object) -> str:
    """Row text for a terminal line (escaped, bounded): a row is data anyone with the store can write."""
    from ..durable.report import shown_text

    return shown_text(text, 200)


def _json(value: object) -> str:
    from ..durable.report import shown_json

    return shown_json(value)


def _show_goal(row: dict, args: argparse.Namespace) -> int:
    """A recorded goal (docs/goals.md): its last result, and what it waits for."""
    summary = row.get("summary") or {}
    data = {**(summary.get("goal") or {}), "run_id": row["run_id"], "status": row["status"],
            "waiting": summary.get("waiting")}
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        return EXIT_OK
    print(f"goal {_safe(row['run_id'])}: {row['status']}  {_safe(row.get('goal') or '')}")
    for s in (data.get("goal_execution") or {}).get("steps", []):
        print(f"  {_safe(s['id'])}: {s['status']} ({_safe(s.get('verdict'))}) {_safe(s['task'])}")
    if data["waiting"]:
        print(f"  waiting for a person (steps {_safe(', '.join(map(str, data['waiting'].get('steps', []))))}): "
              f"sophon-dsl approve {row['run_id']} [--reject]")
    return EXIT_OK


def _show_agent(store, row: dict, args: argparse.Namespace) -> int:
    """A recorded agent run (docs/runtime.md): how it ended, and each recorded turn's reply and calls."""
    from ..durable.agent_run import stored_agent
    from ..durable.report import waiting_lines, waiting_view

    data = stored_agent(store, row)
    data["waiting"] = waiting_view(data.get("waiting"))  # (each call's arguments, escaped)
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        return EXIT_OK
    print(f"agent {_safe(data['run_id'])}: {data['status']}  {_safe(data['request'] or '')}")
    for t in data["recorded_turns"]:
        how = "complete" if t["complete"] else f"cut after {len(t['reply'])} characters"
        print(f"  turn {t['turn']}: reply {how}")
        for c in t["calls"]:
            extra = " (in doubt: started, outcome unknown)" if c.get("in_doubt") else ""
            err = f" {_safe(c['error']['error'])}: {_safe(c['error'].get('cause'))}" if c.get("error") else ""
            print(f"    {_safe(c['id'])}: {c['status']}{extra}{err}")
    if data["waiting"]:
        print(f"  waiting for approval ({_safe(data['waiting'].get('decision'))}, "
              f"{_safe(data['waiting'].get('decision_run'))}): sophon-dsl approve {data['run_id']} [--reject]")
        for line in waiting_lines(data["waiting"]):
            print("    " + line)
    if data["state"] is not None:
        print(_json({**data["state"], **({"output": data["output"]} if data["output"] is not None else {})}))
    return EXIT_OK
