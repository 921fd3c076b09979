"""What the CLI commands share about durable runs: which store (``--store``,
``--no-store``, ``$SOPHON_DSL_STORE``, the per-user default), and the flags turned into
the typed :class:`~sophon_dsl.durable.runconfig.ToolConfig` the durable package takes
(the flags a resume needs again come from the row only when it can vouch for them)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..durable import default_store_url, open_store, sqlite_path
from ..durable.base import StoreNotFound
from ..durable.runconfig import LIST_FLAGS, STORED_KEYS, TOOL_FLAGS, ToolConfig
from ..durable.runconfig import stored_config as _stored_config
from ..durable.trust import StoredConfigError, seal_meta
from .common import UsageError

__all__ = ["TOOL_FLAGS", "find_run", "open_cli_store", "run_store_options", "stored_config", "tool_args", "tool_config",
           "tool_meta"]


def open_cli_store(url: str | None, *, create: bool = True) -> Any:
    """The store ``url`` names (default: the per-user one); a bad URL or an unreachable
    server is a usage error (exit 2), not a traceback.  ``create=False`` (the commands that
    only read or continue runs): a SQLite file that does not exist is a usage error naming
    it, not a new empty database (a typo in the path would otherwise look like "no runs");
    so is a database that holds none of the store's tables (``Store.NotFound``: nothing is
    created in it)."""
    url = url or default_store_url()
    path = sqlite_path(url)
    if not create and path is not None and not os.path.exists(path):
        raise UsageError(f"--store: no run store at {path} (nothing was recorded there; "
                         "'sophon-dsl run' creates it)")
    try:
        return open_store(url, create=create)
    except StoreNotFound as exc:  # a reader on a server database where nothing was recorded
        raise UsageError(f"{exc.code}: --store: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a URL we cannot use, a server that is down
        raise UsageError(f"--store: {exc}") from None


def find_run(command: str, store: Any, run_id: str) -> dict | None:
    """The row of ``run_id`` in ``store``; None, said on stderr (the URL without its
    password), when there is none: the commands then exit 2."""
    row = store.get_run(run_id)
    if row is None:
        import sys

        from ..durable.base import display_url

        print(f"sophon-dsl {command}: error: no run {run_id!r} in {display_url(store.url)}", file=sys.stderr)
    return row


def tool_config(args: argparse.Namespace) -> ToolConfig:
    """The tool flags of a command (a command without one of them: None)."""
    return ToolConfig(**{flag: getattr(args, flag, None) for flag in TOOL_FLAGS})


def run_store_options(args: argparse.Namespace, options: dict) -> None:
    """``--store`` / the default store into the run's options (nothing with ``--no-store``)."""
    if getattr(args, "no_store", False):
        return
    store = open_cli_store(getattr(args, "store", None))
    store.close_after_run = True  # the run closes it when it ends
    options["store"] = store
    options["store_meta"] = seal_meta(tool_meta(args))


def tool_meta(args: argparse.Namespace) -> dict:
    """The tool flags (paths made absolute) and the provider, kept with a run."""
    return tool_config(args).meta(getattr(args, "provider", None), getattr(args, "model", None))


def stored_config(args: argparse.Namespace, row: dict) -> dict:
    """What a resume or approve of ``row`` may take from the store (see
    :func:`~sophon_dsl.durable.runconfig.stored_config`); a row that would supply a value it
    cannot vouch for is a usage error (exit 2) naming ``Store.ConfigUntrusted`` /
    ``Store.ConfigChanged``.  Called before anything is imported."""
    given = [k for k in STORED_KEYS if getattr(args, k, None) is not None]
    try:
        return _stored_config(row, tool_config(args), given)
    except StoredConfigError as exc:
        raise UsageError(f"{exc.error}: {exc.cause}") from None


def tool_args(args: argparse.Namespace, meta: dict | None) -> argparse.Namespace:
    """``args`` with the tool flags of a resume: those given now, else the run's own
    (``meta``: what :func:`stored_config` let through, never the row's meta unchecked)."""
    out = argparse.Namespace(**vars(args))
    taken = tool_config(args).stored_fields(meta)
    for flag in TOOL_FLAGS:
        if flag in taken:
            setattr(out, flag, taken[flag])
        elif not hasattr(out, flag):  # (a command without the flag: registry_for reads it)
            setattr(out, flag, [] if flag in LIST_FLAGS else None)
    return out
