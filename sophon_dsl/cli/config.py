"""``sophon-dsl config [PATH]``: the effective project settings and where each comes from.

Exit 0; 2 when the config file is not valid (``file:line:column: message``).
"""

from __future__ import annotations

import argparse
import json
import os

from .common import EXIT_OK, UsageError

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError, discover
    from .settings import effective

    if args.path is not None and not os.path.exists(args.path):
        raise UsageError(f"{args.path}: no such file or directory")
    try:
        config = discover(args.path)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    rows = effective(config)
    if args.json:
        print(json.dumps({"file": config.file, "settings": {
            key: {"value": _plain(value), "origin": origin} for key, value, origin in rows}}, indent=2))
        return EXIT_OK
    print(f"# config file: {config.file or '(none found; every setting is its default)'}")
    for key, value, origin in rows:
        print(f"{key} = {json.dumps(_plain(value))}  # {origin}")
    return EXIT_OK


def _plain(value):
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
