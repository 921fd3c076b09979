"""Seams are declared (docs/design.md): what plugs in (a store, an executor, a provider, a
rule, a tool source) does so through a small typed protocol, never through probes.

This test reads every module of ``sophon_dsl/`` (its syntax tree, nothing is imported) and
fails on a new

* ``hasattr(x, ...)`` call, or ``getattr(x, "name", default)`` probe, on an object that is
  not a module: a probed attribute is a capability nobody declared (declare it in a
  Protocol, or read the concrete type's field);
* ``x._name`` where ``x`` is not ``self`` / ``cls`` / a module-level name of the module and
  ``_name`` is not an attribute that module's own classes define: another module's private
  member read from outside;
* ``from <module> import _name`` of a module in another package (a package's modules may
  share their private helpers; other packages get a public name).

What stays is listed below with the reason; a new entry needs one.  Dunder names
(``__wrapped__``, ``__qualname__``...) are Python's own introspection of functions and
classes, and Enum's ``_value_`` / namedtuple's ``_replace`` are those types' public API:
neither is checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sophon_dsl"

# Public API spelt with a leading underscore: namedtuple's and Enum's.
PUBLIC_UNDERSCORED = frozenset({"_replace", "_fields", "_asdict", "_make", "_field_defaults", "_value_", "_name_"})

# CLI modules: ``args`` is an argparse Namespace, the parsed flags of one command; helpers
# shared by several commands read a flag another command does not have.  Plain parsed data,
# not a plugged object.
NAMESPACE_FILES = ("cli/", "scaleout/cli.py")
NAMESPACE_NAMES = frozenset({"args", "out"})

# file (under sophon_dsl/) -> the attribute names it may probe, and why.
PROBES: dict[str, tuple[frozenset[str], str]] = {
    "checks/schema.py": (frozenset({"ref"}),
                         "referencing's Unresolvable: only some of its subclasses carry the ref"),
    "cli/common.py": (frozenset({"problem_mark", "problem", "context", "buffer"}),
                      "PyYAML's errors carry a mark and text only when the parser had a position; "
                      "a text stream given for stdin (a test's StringIO) has no binary buffer"),
    "cli/registry.py": (frozenset({"problem_mark", "problem"}), "PyYAML's errors (see cli/common.py)"),
    "llm/providers/scripted.py": (frozenset({"problem_mark", "problem"}), "PyYAML's errors (see cli/common.py)"),
    "cli/progress.py": (frozenset({"console"}), "rich's Live: its console exists once the view started"),
    "durable/current.py": (frozenset({"call", "cr_frame", "state"}),
                           "current_call(): a thread-local set per worker thread, and the asyncio "
                           "task's frame (the CallRunner's run_call locals) read without a hook in "
                           "the hot path; the frame's objects are the runtime's own"),
    "llm/provider.py": (frozenset({"aclose", "close"}),
                        "close_stream: an async generator or an SDK's stream object, whichever "
                        "closing method that library gives"),
    "llm/providers/anthropic.py": (frozenset({"type"}), "Anthropic SDK stream events: fields vary by event kind"),
    "llm/providers/openai.py": (frozenset({"choices", "index", "finish_reason", "delta", "content", "refusal"}),
                                "OpenAI-compatible SDK chunks: servers omit fields (refusal, index)"),
    "llm/providers/errors.py": (frozenset({"status_code", "body"}),
                                "SDK and transport exceptions: only HTTP errors carry a status and body"),
    "lsp/server.py": (frozenset({"value"}), "pygls position encodings: an enum or its plain string by version"),
    "mcp/conversion.py": (frozenset({"model_dump"}), "MCP SDK results: pydantic models or plain data"),
    "mcp/errors.py": (frozenset({"exceptions"}), "ExceptionGroup from the MCP SDK's task groups, or one error"),
    "mcp/session.py": (frozenset({"error", "code", "exceptions", "serverInfo", "server_info"}),
                       "MCP SDK errors and its initialize result, spelt differently across SDK versions"),
    "refs.py": (frozenset({"lex_position", "msg"}), "jmespath's parse errors: only lexer errors carry a position"),
    "scaleout/executor.py": (frozenset({"asynchronous"}), "a Dask Client given by the caller (sync or async)"),
    "scaleout/ship.py": (frozenset({"co_qualname"}), "code objects have co_qualname from Python 3.11.? on"),
    "scaleout/worker.py": (frozenset({"total_resources"}), "Dask's WorkerState: not in every distributed version"),
    "syntax/dsl_parser.py": (frozenset({"_fields", "line"}),
                             "the model's generic copy (dataclasses, namedtuples, slotted classes) and "
                             "Lark's errors (only some carry a line)"),
    "syntax/dsl_syntax_errors.py": (frozenset({"type", "line", "column", "allowed", "expected"}),
                                    "Lark's UnexpectedInput subclasses carry different fields"),
    "syntax/yaml_source.py": (frozenset({"index"}), "PyYAML marks (the C loader's lack an index)"),
    "telemetry/spans.py": (frozenset({"error"}), "any exception a provider raised: a RunError's code when it has one"),
    "tools.py": (frozenset({"code"}), "pydantic's errors: only some carry a code"),
    "typed_dicts.py": (frozenset({"copy_with"}), "typing's private generic aliases (3.11 and 3.12 differ)"),
}

# file -> private attribute names of another module's object it reads, and why.
PRIVATE: dict[str, tuple[frozenset[str], str]] = {
    "cli/parser.py": (frozenset({"_option_string_actions"}),
                      "argparse has no public list of a parser's flags; read only, for 'did you mean'"),
}


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _modules(tree: ast.Module) -> set[str]:
    """Names the module binds to modules (``import x``, ``import x.y as z``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
    return out


def _top_level(tree: ast.Module) -> set[str]:
    """Names defined at the module's top level (classes, functions, variables)."""
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return out


def _owned(tree: ast.Module) -> set[str]:
    """Attribute names this module's own classes define: methods, class attributes,
    ``__slots__`` entries and ``self.x = ...`` assignments."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for st in node.body:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.add(st.name)
                elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    out.add(st.target.id)
                elif isinstance(st, ast.Assign):
                    for t in st.targets:
                        if isinstance(t, ast.Name):
                            out.add(t.id)
                            if t.id == "__slots__" and isinstance(st.value, (ast.Tuple, ast.List)):
                                out.update(e.value for e in st.value.elts if isinstance(e, ast.Constant))
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            out.add(node.attr)
    return out


def _is_module(node: ast.expr, modules: set[str]) -> bool:
    """``os``, ``json.encoder``, ``sys.modules.get(...)``: a module, not a plugged object."""
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, ast.Call):
        return ast.unparse(node.func) == "sys.modules.get"
    return isinstance(node, ast.Name) and node.id in modules


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _package_of_import(node: ast.ImportFrom, rel: str) -> str | None:
    """The package (dotted, under sophon_dsl) of the module ``node`` imports from, or None
    for a module outside sophon_dsl."""
    parts = ["sophon_dsl", *rel.removesuffix(".py").split("/")]
    here = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    if node.level:
        base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
        target = [*base, *(node.module.split(".") if node.module else [])]
    elif node.module and node.module.split(".")[0] == "sophon_dsl":
        target = node.module.split(".")
    else:
        return None
    path = PACKAGE.parent.joinpath(*target)
    return ".".join(target if path.is_dir() else target[:-1])


def violations(source: str, rel: str, *, listed: bool = True) -> list[tuple[str, str, str]]:
    """What ``source`` (the module ``sophon_dsl/<rel>``) breaks: (kind, name, where) each;
    ``listed=False`` ignores the allowlists (to tell whether an entry is still needed)."""
    tree = ast.parse(source)
    modules, top, owned = _modules(tree), _top_level(tree), _owned(tree)
    probes = PROBES.get(rel, (frozenset(), ""))[0] if listed else frozenset()
    private_ok = PRIVATE.get(rel, (frozenset(), ""))[0] if listed else frozenset()
    namespace = rel.startswith(NAMESPACE_FILES)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr"):
            args = node.args
            probe = node.func.id == "hasattr" or len(args) == 3
            if not probe or len(args) < 2 or not isinstance(args[1], ast.Constant):
                continue  # getattr(x, name) with a computed name: a lookup, not a probe
            obj, name = args[0], args[1].value
            if _is_module(obj, modules) or _dunder(name) or name in probes:
                continue
            if namespace and isinstance(obj, ast.Name) and obj.id in NAMESPACE_NAMES:
                continue
            out.append(("probe", name, f"{rel}:{node.lineno}: {ast.unparse(node)}"))
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names if a.name.startswith("_") and not _dunder(a.name)]
            package = _package_of_import(node, rel) if names else None
            here = ".".join(["sophon_dsl", *rel.split("/")[:-1]])
            if package is not None and package != here:
                out += [("private", name, f"{rel}:{node.lineno}: from {package} import {name}") for name in names
                        if name not in private_ok]
        elif (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not _dunder(node.attr)
              and node.attr not in PUBLIC_UNDERSCORED):
            obj = node.value
            if isinstance(obj, ast.Name) and (obj.id in ("self", "cls") or obj.id in top or obj.id in modules):
                continue
            if node.attr in owned or node.attr in private_ok:
                continue
            out.append(("private", node.attr, f"{rel}:{node.lineno}: {ast.unparse(node)}"))
    return out


# Generated code, not ours to shape: Lark's standalone parser (grammar/generate_parser.py).
GENERATED = frozenset({"syntax/_lalr_parser.py"})


def test_no_undeclared_probes_or_private_reads():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if _rel(path) in GENERATED:
            continue
        found += violations(path.read_text(encoding="utf-8"), _rel(path))
    assert found == [], ("declare the seam (a Protocol in the owning package's protocols module, or "
                         "the concrete type) instead of:\n" + "\n".join(f"{kind} {where}" for kind, _, where in found))


def test_every_allowlist_entry_is_still_needed():
    """An entry whose probe or read is gone is removed, so the list stays the short truth."""
    for table, kind in ((PROBES, "probe"), (PRIVATE, "private")):
        for rel, (names, why) in table.items():
            assert why, f"{rel}: say why it stays"
            source = (PACKAGE / rel).read_text(encoding="utf-8")
            flagged = {name for k, name, _ in violations(source, rel, listed=False) if k == kind}
            assert names <= flagged, f"{rel}: {sorted(names - flagged)} no longer read there: drop from the list"


@pytest.mark.parametrize("code, flagged", [
    ("def f(store):\n    return hasattr(store, 'commit')\n", True),
    ("def f(agent):\n    return getattr(agent, 'depth', 0)\n", True),
    ("from .agent import Agent\ndef f(a: Agent):\n    return a._depth\n", True),
    ("import os\nX = hasattr(os, 'getuid')\n", False),                 # a module
    ("def f(fn):\n    return getattr(fn, '__wrapped__', fn)\n", False),  # Python's introspection
    ("def f(x, name):\n    return getattr(x, name, None)\n", False),     # a computed lookup
    ("class A:\n    def __init__(self):\n        self._n = 0\n    def same(self, other):\n"
     "        return other._n == self._n\n", False),                       # this module's class
    ("from ..refs import _compile\n", True),                             # another package's private
    ("from .dsl_parser import _grammar\n", False),                       # the same package's
])
def test_the_scan_tells_probes_from_plain_code(code, flagged):
    assert bool(violations(code, "syntax/example.py")) is flagged
