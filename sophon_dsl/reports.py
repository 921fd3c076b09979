"""Diagnostics for machines that are not sophon-dsl: SARIF 2.1.0 (code scanning) and
GitHub Actions workflow commands (``::error file=...,line=...,col=...::message``).

``render(diagnostics, form, sources)`` is the one entry point ``sophon-dsl check
--format`` uses; ``text`` and ``json`` are :mod:`sophon_dsl.diagnostics`' own renderings.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Sequence
from urllib.parse import quote

from .errors import OptionError
from .diagnostics import CODES, Diagnostic, Severity, render_json, render_text, sort_key, visible

__all__ = ["REPORT_FORMATS", "render", "render_github", "render_sarif", "sarif_log"]

REPORT_FORMATS = ("text", "json", "sarif", "github")

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

# SARIF's result levels and GitHub's workflow commands, per severity
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
_GITHUB_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}


def render(diagnostics: Sequence[Diagnostic], form: str, sources: dict[str, str] | None = None) -> str:
    """The diagnostics in one of :data:`REPORT_FORMATS` (``text`` with source excerpts)."""
    if form == "text":
        return render_text(diagnostics, sources=sources)
    if form == "json":
        return render_json(diagnostics)
    if form == "sarif":
        return render_sarif(diagnostics)
    if form == "github":
        return render_github(diagnostics)
    raise OptionError(f"unknown report format {form!r}; expected one of {', '.join(REPORT_FORMATS)}")


# -- SARIF -----------------------------------------------------------------------------


def _rule_name(title: str) -> str:
    """``unknown tool`` -> ``UnknownTool``: SARIF rule names are identifiers, not sentences."""
    words = "".join(c if c.isalnum() else " " for c in title).split()
    return "".join(w[:1].upper() + w[1:] for w in words)


def _rules() -> list[dict]:
    return [{
        "id": code,
        "name": _rule_name(title),
        "shortDescription": {"text": title},
        "defaultConfiguration": {"level": _SARIF_LEVEL[severity]},
    } for code, (severity, title) in CODES.items()]


def _artifact_uri(file: str) -> str:
    """A relative path stays relative (code scanning resolves it against the checkout);
    an absolute one becomes a ``file://`` URI; both percent-encoded."""
    path = file.replace(os.sep, "/")
    if os.path.isabs(file):
        return "file://" + quote(path if path.startswith("/") else "/" + path)
    return quote(path)


def _location(d: Diagnostic) -> dict:
    physical: dict = {"artifactLocation": {"uri": _artifact_uri(d.file or "")}}
    span = d.span
    if span is not None:
        region = {"startLine": max(span.line, 1), "startColumn": max(span.column, 1)}
        if (span.end_line, span.end_column) > (span.line, span.column):
            region["endLine"] = span.end_line
            region["endColumn"] = max(span.end_column, 1)
        physical["region"] = region
    location: dict = {"physicalLocation": physical}
    if d.path:
        location["logicalLocations"] = [{"fullyQualifiedName": d.path, "kind": "element"}]
    return location


def sarif_log(diagnostics: Iterable[Diagnostic], version: str | None = None) -> dict:
    """A SARIF 2.1.0 log with one run: every code of :data:`CODES` as a rule, one result
    per diagnostic (with its file and region when it has them)."""
    index = {code: i for i, code in enumerate(CODES)}
    results = []
    for d in sorted(diagnostics, key=sort_key):
        text = d.message + "".join(f"\nnote: {r}" for r in d.related)
        result: dict = {"ruleId": d.code, "level": _SARIF_LEVEL[d.severity], "message": {"text": text}}
        if d.code in index:
            result["ruleIndex"] = index[d.code]
        if d.file:
            result["locations"] = [_location(d)]
        results.append(result)
    driver: dict = {"name": "sophon-dsl", "rules": _rules()}
    if version:
        driver["version"] = version
    # columns count code points (a dagger is one column), not SARIF's default UTF-16 units
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": driver}, "columnKind": "unicodeCodePoints", "results": results}]}


def render_sarif(diagnostics: Iterable[Diagnostic]) -> str:
    from . import __version__

    return json.dumps(sarif_log(diagnostics, __version__), ensure_ascii=False, indent=2)


# -- GitHub Actions --------------------------------------------------------------------


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(diagnostics: Iterable[Diagnostic]) -> str:
    """One workflow command per diagnostic; GitHub shows each as an annotation on the line."""
    lines = []
    for d in sorted(diagnostics, key=sort_key):
        props = []
        if d.file:
            props.append(f"file={_escape_property(visible(d.file))}")
        if d.span is not None:
            props.append(f"line={d.span.line}")
            props.append(f"col={d.span.column}")
            if d.span.end_line != d.span.line:
                props.append(f"endLine={d.span.end_line}")
            elif d.span.end_column > d.span.column:
                props.append(f"endColumn={d.span.end_column}")
        props.append(f"title={_escape_property(f'{d.code} {CODES.get(d.code, (None, d.code))[1]}')}")
        message = f"[{d.code}] {d.message}" + (f" (at {d.path})" if d.path else "")
        message += "".join(f"\nnote: {r}" for r in d.related)
        # (the log shows it on a terminal: control characters written \uXXXX, as check's text does)
        lines.append(f"::{_GITHUB_COMMAND[d.severity]} {','.join(props)}::{_escape_data(visible(message))}")
    return "\n".join(lines)
