"""One exception root: every public exception class defined in sophon_dsl derives from SophonError."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import sophon_dsl
from sophon_dsl.errors import SophonError


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(sophon_dsl.__path__, prefix="sophon_dsl."):
        if info.name.rsplit(".", 1)[-1] == "__main__":  # importing it would run the command line
            continue
        names.append(info.name)
    return sorted(names)


def _exception_classes(module) -> list[type]:
    return [obj for name, obj in vars(module).items()
            if inspect.isclass(obj) and issubclass(obj, BaseException)
            and obj.__module__ == module.__name__ and not name.startswith("_")]


def test_the_walk_finds_the_packages_modules():
    names = _modules()
    for expected in ("sophon_dsl.diagnostics", "sophon_dsl.runtime.errors", "sophon_dsl.mcp.errors",
                     "sophon_dsl.llm.provider", "sophon_dsl.llm.providers.errors", "sophon_dsl.refs"):
        assert expected in names


# Lark's standalone parser (generated, grammar/generate_parser.py): its exceptions never leave
# the DSL parser, which turns every one into a diagnostic (parse_dsl never raises).
GENERATED = frozenset({"sophon_dsl.syntax._lalr_parser"})


def test_every_public_exception_derives_from_sophon_error():
    outside = []
    checked = 0
    for name in sorted(set(_modules()) - GENERATED):
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # an optional dependency that is not installed
            if exc.name and not exc.name.startswith("sophon_dsl"):
                continue
            raise
        for cls in _exception_classes(module):
            checked += 1
            if not issubclass(cls, SophonError):
                outside.append(f"{name}.{cls.__qualname__}")
    assert checked >= 6
    assert outside == [], ("these exception classes should derive from sophon_dsl.errors.SophonError "
                           "(add it to the class statement's bases, keeping the others)")


@pytest.mark.parametrize("path", [
    "sophon_dsl.diagnostics.DiagnosticError",
    "sophon_dsl.runtime.errors.RunError",
    "sophon_dsl.runtime.errors.PlanInvalid",
    "sophon_dsl.llm.provider.ProviderError",
    "sophon_dsl.llm.providers.StreamInterruptedError",
    "sophon_dsl.mcp.McpToolError",
    "sophon_dsl.refs.ReferenceSyntaxError",
])
def test_each_family_is_a_sophon_error(path):
    module, _, name = path.rpartition(".")
    assert issubclass(getattr(importlib.import_module(module), name), SophonError)


def test_former_bases_still_catch():
    from sophon_dsl.refs import ReferenceSyntaxError

    with pytest.raises(ValueError):
        raise ReferenceSyntaxError("bad reference", 3)


def test_the_errors_module_imports_nothing():
    # Every module imports it, so it must stay free of imports (and of import loops).
    tree = ast.parse(Path(sophon_dsl.__file__).with_name("errors.py").read_text(encoding="utf-8"))
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert all(isinstance(node, ast.ImportFrom) and node.module == "__future__" for node in imports)


def test_the_root_is_exported_from_the_package():
    assert sophon_dsl.SophonError is SophonError
    assert "SophonError" in sophon_dsl.__all__
