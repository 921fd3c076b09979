"""Adding a CLI command touches three places (docs/design.md, "Typical changes"): its flags
(a function in ``cli/parser.py``'s ``COMMAND_ARGS``), its module ``cli/<name>.py`` with
``run(args)``, and its entry in ``COMMAND_MODULES``.  This test fails when one is missing."""

from __future__ import annotations

import argparse
import importlib

from sophon_dsl.cli import COMMAND_MODULES
from sophon_dsl.cli.parser import build_parser


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    return {name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices}


def test_every_command_has_flags_a_module_and_a_run():
    parsed = _commands(build_parser())
    assert parsed == set(COMMAND_MODULES)
    for name, module in COMMAND_MODULES.items():
        assert callable(importlib.import_module(f"sophon_dsl.cli.{module}").run), name
