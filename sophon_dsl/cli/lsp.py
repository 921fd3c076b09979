"""``sophon-dsl lsp``: the language server over stdin/stdout (docs/editors.md).

Needs the ``lsp`` extra (pygls, lsprotocol): without it, a usage error saying how to
install it (exit 2), not a traceback.
"""

from __future__ import annotations

import argparse

from .common import EXIT_OK, UsageError

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    if not args.debounce >= 0:
        raise UsageError(f"--debounce: expected a number of seconds >= 0, got {args.debounce}")
    try:
        from ..lsp.server import serve
    except ImportError as exc:
        raise UsageError(f"the language server needs pygls and lsprotocol ({exc}): "
                         "pip install 'sophon-dsl[lsp]'") from None
    serve(args.debounce)
    return EXIT_OK
