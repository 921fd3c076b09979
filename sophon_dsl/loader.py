"""Loading and dumping plans in any of the three forms.

``parse`` never raises: it returns the plan it could build and every
diagnostic.  ``loads``/``load`` are the convenient public entry points; they
raise :class:`~sophon_dsl.diagnostics.DiagnosticError` when the source has
errors.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal as TypingLiteral

from .errors import OptionError
from .diagnostics import Diagnostic, DiagnosticError, Span, has_errors
from .model import Plan

__all__ = ["FORMATS", "LoadResult", "dumps", "format_for_path", "load", "loads", "not_utf8", "parse", "parse_file"]

Format = TypingLiteral["dsl", "json", "yaml"]
FORMATS: tuple[str, ...] = ("dsl", "json", "yaml")
_EXTENSIONS = {".plan": "dsl", ".sophon": "dsl", ".dsl": "dsl", ".json": "json", ".jsonc": "json",
               ".yaml": "yaml", ".yml": "yaml"}


@dataclass(frozen=True)
class LoadResult:
    plan: Plan
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)


def format_for_path(path: str | os.PathLike) -> str | None:
    """The form a file's extension implies, or ``None``."""
    return _EXTENSIONS.get(Path(path).suffix.lower())


def parse(text: str, format: str = "dsl", file: str | None = None) -> LoadResult:
    """Parse plan source text in ``format`` (dsl, json or yaml). Never raises."""
    fmt = (format or "dsl").lower()
    if fmt in ("yml",):
        fmt = "yaml"
    if fmt == "dsl":
        from .syntax.dsl_parser import parse_dsl

        plan, diags = parse_dsl(text, file=file)
        return LoadResult(plan, [d.with_file(file) for d in diags])
    if fmt in ("json", "yaml"):
        from .syntax.documents import document_to_plan

        if fmt == "json":
            from .syntax.json_source import parse_json as parse_source
        else:
            from .syntax.yaml_source import parse_yaml as parse_source
        node, diags = parse_source(text, file=file)
        if node is None:
            return LoadResult(Plan(file=file, source=text, form=fmt), [d.with_file(file) for d in diags])
        # the calls keep no Span objects until one is asked for (issue 9's memory target for
        # JSON, issue 30 item 12's for YAML: at most twice JSON's peak); the first span read
        # reads the source again, once per plan, which for YAML costs about a second load
        plan, more = document_to_plan(node, file=file, source=text, form=fmt, deferred_spans=True)
        return LoadResult(plan, [d.with_file(file) for d in (*diags, *more)])
    raise OptionError(f"unknown plan format {format!r}; expected one of {', '.join(FORMATS)}",
                      code="Load.UnknownFormat")


def parse_file(path: str | os.PathLike, format: str | None = None) -> LoadResult:
    """Read and parse a file; unreadable files become an E005 diagnostic."""
    name = os.fspath(path)
    fmt = format or format_for_path(name)
    if fmt is None:
        return LoadResult(Plan(file=name), [Diagnostic(
            "E005", f"cannot tell the plan form of {name!r} from its extension; "
                    "use .plan (DSL), .yaml/.yml or .json, or give the format ('dsl', 'json' or 'yaml')",
            file=name)])
    try:
        with open(name, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        # the text reader's error counts from the start of the chunk it was decoding, not
        # of the file: read the bytes again to say where the bad byte is
        try:
            with open(name, "rb") as fh:
                data = fh.read()
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return LoadResult(Plan(file=name), [not_utf8(name, data, exc)])
        except OSError:
            pass
        return LoadResult(Plan(file=name), [Diagnostic("E005", f"cannot read {name!r}: not UTF-8 text", file=name)])
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return LoadResult(Plan(file=name), [Diagnostic("E005", f"cannot read {name!r}: {reason}", file=name)])
    return parse(text, fmt, file=name)


def not_utf8(name: str, data: bytes, exc: UnicodeDecodeError) -> Diagnostic:
    """E005 for plan bytes that are not UTF-8, at the first bad byte (lines and columns
    counted as in the text before it, so an editor's go-to lands on it)."""
    before = data[:exc.start].decode("utf-8", errors="replace")
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    return Diagnostic("E005", f"cannot read {name!r}: not UTF-8 text ({exc})",
                      Span.point(line, column), file=name)


def loads(text: str, format: str = "dsl", *, file: str | None = None) -> Plan:
    """Parse plan text; raise :class:`DiagnosticError` listing every error found."""
    result = parse(text, format, file=file)
    if not result.ok:
        raise DiagnosticError(result.diagnostics, text)
    return result.plan


def load(path: str | os.PathLike, format: str | None = None) -> Plan:
    """Load a plan file; the form comes from the extension unless ``format`` is given.

    FileNotFoundError when there is no such file (as ``open`` raises); DiagnosticError when
    it does not load."""
    if not os.path.exists(path):
        import errno

        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(path))
    result = parse_file(path, format)
    if not result.ok:
        raise DiagnosticError(result.diagnostics, result.plan.source)
    return result.plan


def dumps(plan: Plan, format: str = "dsl") -> str:
    """Print a plan in any form: ``dsl`` (canonical text), ``json`` or ``yaml``."""
    fmt = format.lower()
    if fmt == "dsl":
        from .syntax.dsl_printer import print_dsl

        return print_dsl(plan)
    if fmt == "json":
        from .syntax.doc_printer import dump_json

        return dump_json(plan)
    if fmt in ("yaml", "yml"):
        from .syntax.doc_printer import dump_yaml

        return dump_yaml(plan)
    raise OptionError(f"unknown plan format {format!r}; expected one of {', '.join(FORMATS)}",
                      code="Load.UnknownFormat")
