"""What the CLI commands share about durable runs: which store (``--store``, ``--no-store``,
``$SOPHON_DSL_STORE``, the per-user default), and the flags a resume needs again (taken
from the row only when it can vouch for them: :mod:`.trust`)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from . import default_store_url, open_store, sqlite_path
from .trust import check_meta, seal_meta

__all__ = ["TOOL_FLAGS", "open_cli_store", "run_store_options", "stored_config", "tool_args", "tool_meta"]

# the flags that build a run's tool registry (cli/registry.py), kept with the run
TOOL_FLAGS = ("tools", "no_stdlib", "stdlib", "sandbox", "stdlib_config", "allow_host")


def open_cli_store(url: str | None, *, create: bool = True) -> Any:
    """The store ``url`` names (default: the per-user one); a bad URL or an unreachable
    server is a usage error (exit 2), not a traceback.  ``create=False`` (the commands that
    only read or continue runs): a SQLite file that does not exist is a usage error naming
    it, not a new empty database (a typo in the path would otherwise look like "no runs")."""
    from ..cli.common import UsageError

    url = url or default_store_url()
    path = sqlite_path(url)
    if not create and path is not None and not os.path.exists(path):
        raise UsageError(f"--store: no run store at {path} (nothing was recorded there; "
                         "'sophon-dsl run' creates it)")
    try:
        return open_store(url)
    except Exception as exc:  # noqa: BLE001 - a URL we cannot use, a server that is down
        raise UsageError(f"--store: {exc}") from None


def _absolute(source: str) -> str:
    """A tool source as a resume from another directory finds it again."""
    return os.path.abspath(source) if os.path.exists(source) else source


def run_store_options(args: argparse.Namespace, options: dict) -> None:
    """``--store`` / the default store into the run's options (nothing with ``--no-store``)."""
    if getattr(args, "no_store", False):
        return
    store = open_cli_store(getattr(args, "store", None))
    store.close_after_run = True  # the run closes it when it ends
    options["store"] = store
    options["store_meta"] = seal_meta(tool_meta(args))


def tool_meta(args: argparse.Namespace) -> dict:
    """The tool flags (paths made absolute) and the provider, kept with a run so that a
    resume from another directory builds the same tools."""
    meta = {flag: getattr(args, flag, None) for flag in TOOL_FLAGS}
    meta["tools"] = [_absolute(t) for t in meta["tools"] or ()]
    for flag in ("sandbox", "stdlib_config"):
        if meta[flag]:
            meta[flag] = os.path.abspath(meta[flag])
    meta["provider"], meta["model"] = getattr(args, "provider", None), getattr(args, "model", None)
    return meta


def _given(args: argparse.Namespace) -> bool:
    """Some tool flag is on the command line: then the command line's set is the run's."""
    return any(getattr(args, flag, None) not in (None, False, [], ()) for flag in TOOL_FLAGS)


# the meta keys each kind of run takes from its row besides the tool flags
_EXTRA = {"agent": ("provider", "model", "delegate_dir"),
          "goal": ("provider", "model", "planner_provider", "evaluator_provider", "approve")}


def stored_config(args: argparse.Namespace, row: dict) -> dict:
    """What a resume or approve of ``row`` may take from the store: the tool flags (unless
    some are given now: then the command line's set is used) and the provider, model, ...
    not given now, when the row can vouch for them (:func:`.trust.check_meta`).  A row that
    would supply a value it cannot vouch for is a usage error (exit 2) naming
    ``Store.ConfigUntrusted`` / ``Store.ConfigChanged``.  Called before anything is imported."""
    from ..cli.common import UsageError
    from .trust import StoredConfigError

    spec = row.get("spec") or {}
    used = [k for k in _EXTRA.get(spec.get("kind"), ("provider", "model")) if getattr(args, k, None) is None]
    if not _given(args):
        used[:0] = TOOL_FLAGS
    try:
        return check_meta(spec.get("meta"), used, row.get("run_id", "?"))
    except StoredConfigError as exc:
        raise UsageError(f"{exc.error}: {exc.cause}") from None


def tool_args(args: argparse.Namespace, meta: dict | None) -> argparse.Namespace:
    """The tool flags of a resume: those given now, else the run's own (``meta``: what
    :func:`stored_config` let through, never the row's meta unchecked)."""
    out = argparse.Namespace(**vars(args))
    given = _given(args)
    for flag in TOOL_FLAGS:
        if not given and meta and flag in meta:
            value = meta[flag]
            setattr(out, flag, [] if value is None and flag in ("tools", "allow_host") else value)
        elif not hasattr(out, flag):
            setattr(out, flag, [] if flag in ("tools", "allow_host") else None)
    return out
