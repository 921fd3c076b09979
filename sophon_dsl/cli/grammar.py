"""``sophon-dsl grammar``: the DSL grammar for grammar-constrained decoders."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from ..llm.constrained import decoder_grammar

    sys.stdout.write(decoder_grammar(args.format))
    return 0
