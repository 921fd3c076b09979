"""The raises of built-in exceptions left in sophon_dsl/, each with the reason it stays
(issue 27, item 7).  What a user can see is a SophonError subclass with a ``code``
(sophon_dsl/errors.py; it keeps the built-in base it replaced, so ``except ValueError``
still catches it); an internal invariant raises AssertionError.  A new ``raise
ValueError(...)`` fails here: make it a SophonError, or add it below with its reason."""

from __future__ import annotations

import ast
import builtins
from collections import Counter
from pathlib import Path

import pytest

import sophon_dsl
from sophon_dsl.errors import InsideEventLoop, MissingExtra, OptionError, OptionTypeError, SophonError

PKG = Path(sophon_dsl.__file__).parent
# Lark's standalone parser, generated (grammar/generate_parser.py): its errors reach no user,
# the parser turns them into diagnostics (syntax/dsl_syntax_errors.py)
GENERATED_PARSER = PKG / "syntax" / "_lalr_parser.py"
BUILTIN = {name for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, BaseException)}
# internal invariants and abstract methods: not counted
INVARIANT = {"AssertionError", "NotImplementedError"}

_PROTOCOL = "the protocol of what it implements (a mapping, a sequence, module __getattr__, a file read)"
ALLOWED: dict[tuple[str, str], tuple[int, str]] = {
    ("__init__.py", "AttributeError"): (1, "module __getattr__: lazy exports"),
    ("runtime/__init__.py", "AttributeError"): (1, "module __getattr__: lazy exports"),
    ("dataflow.py", "IndexError"): (1, _PROTOCOL),
    ("dataflow.py", "KeyError"): (2, _PROTOCOL),
    ("syntax/json_source.py", "IndexError"): (2, _PROTOCOL),
    ("syntax/yaml_source.py", "IndexError"): (1, _PROTOCOL),
    ("syntax/located.py", "KeyError"): (1, _PROTOCOL),
    ("tools.py", "KeyError"): (1, "ToolRegistry[name]: a mapping's missing key"),
    ("runtime/approval.py", "EOFError"): (1, _PROTOCOL),
    ("runtime/invoker.py", "RuntimeError"): (1, "concurrent.futures.Executor.submit after shutdown (its contract)"),
    ("files.py", "PermissionError"): (1, "an OSError with errno EACCES: callers handle OSError"),
    ("loader.py", "FileNotFoundError"): (1, "an OSError with errno ENOENT, as open() raises: callers handle OSError"),
    ("durable/base.py", "TypeError"): (1, "json.dumps default= hook: json's contract"),
    ("cli/common.py", "ValueError"): (1, "json parse_constant hook, caught by its caller as a usage error"),
    ("mcp/conversion.py", "ValueError"): (1, "json parse_constant hook, caught by its caller"),
    ("runtime/state.py", "ValueError"): (2, "to_json_value's documented ValueError: the runner reports it as "
                                            "Tool.OutputInvalid"),
    ("toolsource.py", "ImportError"): (1, "caught: becomes diagnostic E110, whose message names the class"),
    ("compiler.py", "RuntimeError"): (1, "raised inside a tool call: the run records 'RuntimeError: ...' as "
                                         "the call's Tool.Failed cause"),
    ("scaleout/executor.py", "ValueError"): (2, "left for issue 27 item 4, which rewrites the executor specs"),
}


def _builtin_raises() -> Counter:
    found: Counter = Counter()
    for path in PKG.rglob("*.py"):
        if path == GENERATED_PARSER:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in BUILTIN and exc.id not in INVARIANT:
                    found[(path.relative_to(PKG).as_posix(), exc.id)] += 1
    return found


def test_built_in_raises_are_only_the_allowed_ones() -> None:
    found = _builtin_raises()
    grown = {k: n for k, n in found.items() if n > ALLOWED.get(k, (0, ""))[0]}
    assert not grown, (f"new raises of built-in exceptions {grown}: raise a SophonError subclass with a code "
                       "(sophon_dsl/errors.py) or, for an internal invariant, AssertionError")
    stale = {k: (n, found.get(k, 0)) for k, (n, _) in ALLOWED.items() if found.get(k, 0) < n}
    assert not stale, f"allowed raises that are gone (lower the allowance): {stale}"


def test_every_allowance_gives_its_reason() -> None:
    assert all(reason.strip() for _, reason in ALLOWED.values())


@pytest.mark.parametrize("cls, base", [(OptionError, ValueError), (OptionTypeError, TypeError),
                                       (InsideEventLoop, RuntimeError), (MissingExtra, ImportError)])
def test_each_family_keeps_the_built_in_it_replaced(cls: type, base: type) -> None:
    assert issubclass(cls, SophonError) and issubclass(cls, base)
    assert isinstance(cls.code, str) and "." in cls.code


def test_a_user_mistake_is_a_coded_sophon_error_and_still_a_value_error() -> None:
    from sophon_dsl import loads
    from sophon_dsl.durable import open_store
    from sophon_dsl.model import Risk

    with pytest.raises(ValueError) as info:
        loads("[]", format="toml")
    assert isinstance(info.value, SophonError) and info.value.code == "Load.UnknownFormat"
    with pytest.raises(OptionError) as info:
        open_store("ftp://nowhere")
    assert info.value.code == "Store.UrlInvalid"
    with pytest.raises(OptionError) as info:
        Risk.parse("extreme")
    assert info.value.code == "Risk.Unknown"
    with pytest.raises(KeyError):
        sophon_dsl.run("†state.x = f()", {"f": lambda: 1}).call("nope")


def test_run_inside_an_event_loop_is_a_coded_error() -> None:
    import asyncio

    async def inside() -> None:
        sophon_dsl.run("return 1")

    with pytest.raises(InsideEventLoop) as info:
        asyncio.run(inside())
    assert isinstance(info.value, RuntimeError) and info.value.code == "Api.InsideEventLoop"
