"""``sophon-dsl schema``: the JSON Schema of the solution object for the tools
(OpenAI strict structured outputs)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from .common import excerpt
from .registry import registry_for as _default_registry_for

__all__ = ["read_output_schema", "run"]


def run(args: argparse.Namespace, registry_for: Callable[[argparse.Namespace], Any] = _default_registry_for) -> int:
    """``registry_for(args)`` returns the tool registry, or ``(registry, notes)``."""
    from ..llm.constrained import ALL_META, DEFAULT_META, solution_schema, strict_problems

    registry = registry_for(args)
    if isinstance(registry, tuple) and len(registry) == 2:
        registry = registry[0]
    output_schema = None
    if args.output_schema:
        output_schema = read_output_schema(args.output_schema)
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


def read_output_schema(name: str) -> Any:
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
        return fail(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
                    + excerpt(text, exc.lineno, exc.colno))
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
