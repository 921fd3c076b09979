"""``sophon-dsl grammar`` and ``sophon-dsl schema``: constrained-decoding artefacts.

Hooked into the console script by :func:`register`::

    from .llm.constrained_cli import register as register_constrained
    COMMANDS.update(register_constrained(sub, _add_tools_arg, _registry))
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

__all__ = ["register", "cmd_grammar", "cmd_schema"]


def cmd_grammar(args: argparse.Namespace) -> int:
    from .constrained import decoder_grammar

    sys.stdout.write(decoder_grammar(args.format))
    return 0


def _registry_only(result: Any) -> Any:
    # the CLI's registry function returns (registry, notes); accept a bare registry too
    if isinstance(result, tuple) and len(result) == 2:
        return result[0]
    return result


def _make_cmd_schema(registry_for: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    def cmd_schema(args: argparse.Namespace) -> int:
        from .constrained import ALL_META, DEFAULT_META, solution_schema, strict_problems

        registry = _registry_only(registry_for(args))
        output_schema = None
        if args.output_schema:
            output_schema = _read_output_schema(args.output_schema)
            if output_schema is None:
                return 2
        try:
            schema = solution_schema(registry, output_schema=output_schema,
                                     meta=ALL_META if args.all_meta else DEFAULT_META,
                                     strict=not args.loose, patterns=not args.no_patterns)
        except ValueError as exc:
            print(f"sophon-dsl schema: error: {exc}", file=sys.stderr)
            return 2
        if args.response_format:
            schema = {"type": "json_schema",
                      "json_schema": {"name": "solution", "strict": not args.loose, "schema": schema}}
        print(json.dumps(schema, ensure_ascii=False, indent=2))
        if not args.loose:
            problems = strict_problems(schema["json_schema"]["schema"] if args.response_format else schema)
            for p in problems:
                print(f"warning: not valid for strict mode: {p}", file=sys.stderr)
        return 0

    return cmd_schema


def _read_output_schema(name: str) -> Any:
    """The ``--output-schema`` file as a JSON Schema object, or None after printing what is wrong."""
    def fail(message: str) -> None:
        print(f"sophon-dsl schema: error: --output-schema {name}: {message}", file=sys.stderr)

    try:
        text = Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        return fail(f"cannot read it: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        return fail(f"cannot read it: not UTF-8 ({exc.reason} at byte {exc.start})")
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        from ..cli_run import _excerpt

        return fail(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
                    + _excerpt(text, exc.lineno, exc.colno))
    except (ValueError, RecursionError):
        return fail("invalid JSON: nested too deeply")
    if not isinstance(schema, (dict, bool)):
        return fail(f"expected a JSON Schema (an object such as {{\"type\": \"object\"}}), "
                    f"got {type(schema).__name__}")
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except RecursionError:
        return fail("not a valid JSON Schema: nested too deeply")
    except jsonschema.SchemaError as exc:
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        return fail(f"not a valid JSON Schema at {path}: {exc.message}")
    return schema


def cmd_schema(args: argparse.Namespace, registry_for: Callable[[argparse.Namespace], Any]) -> int:
    return _make_cmd_schema(registry_for)(args)


def register(sub: Any, add_tools_arg: Callable[[argparse.ArgumentParser], None],
             registry_for: Callable[[argparse.Namespace], Any]) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add the ``grammar`` and ``schema`` subcommands to ``sub`` (an argparse
    subparsers action); return ``{command name: handler(args) -> exit code}``.

    ``add_tools_arg(parser)`` adds ``--tools`` / ``--no-stdlib``;
    ``registry_for(args)`` returns the tool registry (or ``(registry, notes)``).
    """
    p = sub.add_parser("grammar", help="print the DSL grammar for grammar-constrained decoders")
    p.add_argument("--format", choices=("llguidance", "lark"), default="llguidance",
                   help="llguidance: Lark dialect of llguidance (vLLM, SGLang, llama.cpp); "
                        "lark: the source grammar (LALR + the parser's post-lexer)")

    p = sub.add_parser("schema", help="print the JSON Schema of the solution object for the tools "
                                      "(OpenAI strict structured outputs)")
    add_tools_arg(p)
    p.add_argument("--output-schema", metavar="FILE", default=None,
                   help="JSON Schema of the final output (default: any value)")
    p.add_argument("--all-meta", action="store_true",
                   help="every meta-property on each call (default: _id, _outputPath, _outputMethod, "
                        "_after, _output)")
    p.add_argument("--no-patterns", action="store_true",
                   help="leave out 'pattern' (fine-tuned OpenAI models reject it)")
    p.add_argument("--loose", action="store_true",
                   help="not strict mode: open objects stay open, optional properties optional")
    p.add_argument("--response-format", action="store_true",
                   help="wrap it as an OpenAI response_format object")
    return {"grammar": cmd_grammar, "schema": _make_cmd_schema(registry_for)}
