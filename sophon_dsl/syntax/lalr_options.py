"""The options the DSL's LALR parser is built with, in one place: the generator of the
committed parser module (``grammar/generate_parser.py``) and the agreement test against
``lark.Lark`` (``tests/test_generated_parser.py``) both read them.  This module imports
nothing, so the generator can load it even when the generated module is missing."""

from __future__ import annotations

__all__ = ["ALWAYS_ACCEPT", "LARK_OPTIONS"]

LARK_OPTIONS: dict[str, object] = {"parser": "lalr", "lexer": "basic", "maybe_placeholders": False,
                                   "propagate_positions": False}

# Terminals the post-lexer consumes though no rule uses them: Lark drops a terminal no rule
# uses unless the post-lexer lists it here, so they shape the tables as the options do.
ALWAYS_ACCEPT: tuple[str, ...] = ("_SEMI",)
