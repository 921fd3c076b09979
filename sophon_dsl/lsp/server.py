"""``sophon-dsl lsp``: the language server (LSP 3.17 over stdio, on pygls + lsprotocol).

The checks are not re-implemented here: every open plan goes through
:func:`.analysis.analyse`, i.e. the loader and :func:`sophon_dsl.fullcheck.check_loaded`,
which ``sophon-dsl check`` calls too (ruff's server shares its linter the same way), against
the tools its project config file names (:mod:`.project`).  This module only translates:
positions (the model counts characters, the client UTF-16 units unless it negotiated
otherwise), diagnostics, and the answers of :mod:`.analysis` into lsprotocol types.

A change is re-checked after a short quiet period (``--debounce``, 50 ms by default): typing
fast re-checks once, not per key.  Each handler catches everything its analysis raises and
logs it, so that no input ends the server (tests/lsp/test_robustness.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from typing import Any, Callable
from urllib.parse import unquote, urlparse

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..diagnostics import Diagnostic, Severity, Span
from . import analysis as an
from .incremental import DslReparser
from .project import Projects

__all__ = ["SophonLanguageServer", "serve"]

log = logging.getLogger("sophon_dsl.lsp")

DSL_LANGUAGE_IDS = frozenset({"sophon", "sophon-dsl", "plan"})
DSL_SUFFIXES = (".plan", ".sophon", ".dsl")
_SEVERITY = {Severity.ERROR: t.DiagnosticSeverity.Error, Severity.WARNING: t.DiagnosticSeverity.Warning,
             Severity.NOTE: t.DiagnosticSeverity.Information}
_LOC = re.compile(r"(?:^|[\s(])((?:[A-Za-z]:)?[^\s():]+):(\d+):(\d+)")


class SophonLanguageServer(LanguageServer):
    def __init__(self, debounce: float = 0.05) -> None:
        super().__init__("sophon-dsl", __version__, text_document_sync_kind=t.TextDocumentSyncKind.Incremental)
        self.debounce = debounce
        self.projects = Projects()
        self.analyses: dict[str, an.Analysis] = {}
        self.pending: dict[str, asyncio.Task] = {}
        # each open DSL document's parser: a change re-parses only the statements it touched
        self.reparsers: dict[str, DslReparser] = {}

    # -- documents ---------------------------------------------------------------------

    def form_of(self, doc: Any) -> str | None:
        """dsl / json / yaml for a document we check; None for one that is not a plan."""
        path = doc.path or ""
        lower = path.lower()
        if doc.language_id in DSL_LANGUAGE_IDS or lower.endswith(DSL_SUFFIXES):
            return "dsl"
        if lower.endswith((".json", ".yaml", ".yml")):
            project = self.projects.for_file(path)
            if project.config.file is not None and project.config.is_plan(path):
                return "json" if lower.endswith(".json") else "yaml"
        return None

    def check(self, uri: str) -> an.Analysis | None:
        doc = self.workspace.get_text_document(uri)
        form = self.form_of(doc)
        if form is None:
            return None
        path = doc.path if doc.uri.startswith("file:") else None
        project = self.projects.for_file(path)
        reparser = self.reparsers.setdefault(uri, DslReparser()) if form == "dsl" else None
        result = an.analyse(doc.source, form, path, project.registry, project.problems, reparser)
        self.analyses[uri] = result
        self.text_document_publish_diagnostics(t.PublishDiagnosticsParams(
            uri=uri, version=doc.version, diagnostics=[self.to_lsp(uri, result, d) for d in result.diagnostics]))
        return result

    def analysis(self, uri: str) -> an.Analysis | None:
        """The analysis of the text as it is now (a pending re-check is done at once)."""
        task = self.pending.pop(uri, None)
        if task is not None:
            task.cancel()
            return self.check(uri)
        return self.analyses.get(uri) or self.check(uri)

    def schedule(self, uri: str) -> None:
        old = self.pending.pop(uri, None)
        if old is not None:
            old.cancel()

        async def later() -> None:
            await asyncio.sleep(self.debounce)
            if self.pending.get(uri) is task:
                del self.pending[uri]
            guarded("re-check", lambda: self.check(uri))

        task = asyncio.get_running_loop().create_task(later())
        self.pending[uri] = task

    # -- positions ---------------------------------------------------------------------

    def encoding(self) -> str:
        enc = self.workspace.position_encoding
        return str(getattr(enc, "value", enc) or "utf-16")

    def units(self, text: str) -> int:
        enc = self.encoding()
        if enc == "utf-8":
            return len(text.encode("utf-8", "surrogatepass"))
        if enc == "utf-32":
            return len(text)
        return len(text.encode("utf-16-le", "surrogatepass")) // 2

    def to_position(self, lines: list[str], line: int, column: int) -> t.Position:
        """1-based (line, column in characters) -> the client's position."""
        row = lines[line - 1] if 0 < line <= len(lines) else ""
        return t.Position(line=max(line - 1, 0), character=self.units(row[:max(column - 1, 0)]))

    def from_position(self, lines: list[str], pos: t.Position) -> tuple[int, int]:
        row = lines[pos.line] if 0 <= pos.line < len(lines) else ""
        units = 0
        for i, ch in enumerate(row):
            if units >= pos.character:
                return pos.line + 1, i + 1
            units += self.units(ch)
        return pos.line + 1, len(row) + 1

    def to_range(self, lines: list[str], span: Span | None) -> t.Range:
        if span is None:  # about the whole plan (a tools file that does not load): its first line
            first = lines[0] if lines else ""
            return t.Range(t.Position(line=0, character=0), t.Position(line=0, character=self.units(first)))
        return t.Range(self.to_position(lines, span.line, span.column),
                       self.to_position(lines, span.end_line, span.end_column))

    def to_lsp(self, uri: str, a: an.Analysis, d: Diagnostic) -> t.Diagnostic:
        related = []
        own = (d.span.line, d.span.column) if d.span else None
        for text in (d.message, *d.related):
            for m in _LOC.finditer(text):
                file, line, col = m.group(1), int(m.group(2)), int(m.group(3))
                if (line, col) == own or (d.span is not None and line == d.span.line):
                    continue
                if a.file is None or file in ("<plan>", a.file) or os.path.basename(file) == os.path.basename(a.file):
                    rel_uri = uri
                else:
                    rel_uri = _file_uri(file)
                related.append(t.DiagnosticRelatedInformation(
                    location=t.Location(uri=rel_uri, range=self.to_range(a.lines, Span.point(line, col))),
                    message=text if text is not d.message else f"see {file}:{line}:{col}"))
        return t.Diagnostic(range=self.to_range(a.lines, d.span), message=d.message,
                            severity=_SEVERITY.get(d.severity, t.DiagnosticSeverity.Error), code=d.code,
                            source="sophon-dsl", related_information=related or None,
                            code_description=None, data=None)


def _file_uri(path: str) -> str:
    from pathlib import Path

    try:
        return Path(path).resolve().as_uri()
    except (ValueError, OSError):
        return "file://" + path


def _path_of(uri: str) -> str:
    return unquote(urlparse(uri).path)


def guarded(what: str, fn: Callable[[], Any], default: Any = None) -> Any:
    """Run one request's work; anything it raises is logged and answered with ``default``."""
    try:
        return fn()
    except Exception:  # bad input never ends the server
        log.exception("sophon-dsl lsp: %s failed", what)
        return default


def build(debounce: float = 0.05) -> SophonLanguageServer:
    server = SophonLanguageServer(debounce)

    @server.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SophonLanguageServer, params: t.DidOpenTextDocumentParams) -> None:
        guarded("check", lambda: ls.check(params.text_document.uri))

    @server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: SophonLanguageServer, params: t.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri)

    @server.feature(t.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: SophonLanguageServer, params: t.DidSaveTextDocumentParams) -> None:
        guarded("check", lambda: ls.check(params.text_document.uri))

    @server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: SophonLanguageServer, params: t.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        task = ls.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        ls.analyses.pop(uri, None)
        ls.reparsers.pop(uri, None)
        ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(t.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: SophonLanguageServer, params: t.DidChangeWatchedFilesParams) -> None:
        # a tools file or the config changed: Projects notices by mtime; re-check what is open
        for uri in list(ls.analyses):
            guarded("re-check", lambda uri=uri: ls.check(uri))

    @server.feature(t.TEXT_DOCUMENT_COMPLETION,
                    t.CompletionOptions(trigger_characters=[".", "@", "(", ",", " "]))
    def completion(ls: SophonLanguageServer, params: t.CompletionParams) -> t.CompletionList:
        def answer() -> t.CompletionList:
            a = ls.analysis(params.text_document.uri)
            if a is None:
                return t.CompletionList(is_incomplete=False, items=[])
            line, col = ls.from_position(a.lines, params.position)
            items = []
            for c in an.complete(a, line, col):
                edit = None
                if c.replace_from is not None:
                    edit = t.TextEdit(range=t.Range(ls.to_position(a.lines, line, c.replace_from), params.position),
                                      new_text=c.insert or c.label)
                items.append(t.CompletionItem(
                    label=c.label, kind=_KINDS.get(c.kind), detail=c.detail or None,
                    documentation=t.MarkupContent(kind=t.MarkupKind.Markdown, value=c.documentation)
                    if c.documentation else None,
                    sort_text=c.sort or None, text_edit=edit,
                    insert_text=None if edit else (c.insert or None)))
            return t.CompletionList(is_incomplete=False, items=items)

        return guarded("completion", answer, t.CompletionList(is_incomplete=False, items=[]))

    @server.feature(t.TEXT_DOCUMENT_HOVER)
    def hover(ls: SophonLanguageServer, params: t.HoverParams) -> t.Hover | None:
        def answer() -> t.Hover | None:
            a = ls.analysis(params.text_document.uri)
            if a is None:
                return None
            found = an.hover(a, *ls.from_position(a.lines, params.position))
            if found is None:
                return None
            text, span = found
            return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=text),
                           range=ls.to_range(a.lines, span) if span else None)

        return guarded("hover", answer)

    @server.feature(t.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: SophonLanguageServer, params: t.DefinitionParams) -> list[t.Location] | None:
        def answer() -> list[t.Location] | None:
            uri = params.text_document.uri
            a = ls.analysis(uri)
            if a is None:
                return None
            out = []
            for file, span in an.definition(a, *ls.from_position(a.lines, params.position)):
                if file is None:
                    out.append(t.Location(uri=uri, range=ls.to_range(a.lines, span)))
                else:  # a tool's Python def: line only (its text is not open here)
                    pos = t.Position(line=span.line - 1, character=0)
                    out.append(t.Location(uri=_file_uri(file), range=t.Range(pos, pos)))
            return out or None

        return guarded("definition", answer)

    @server.feature(t.TEXT_DOCUMENT_REFERENCES)
    def references(ls: SophonLanguageServer, params: t.ReferenceParams) -> list[t.Location] | None:
        def answer() -> list[t.Location] | None:
            uri = params.text_document.uri
            a = ls.analysis(uri)
            if a is None:
                return None
            spans = an.find_references(a, *ls.from_position(a.lines, params.position),
                                       params.context.include_declaration)
            return [t.Location(uri=uri, range=ls.to_range(a.lines, s)) for s in spans] or None

        return guarded("references", answer)

    @server.feature(t.TEXT_DOCUMENT_FORMATTING)
    def formatting(ls: SophonLanguageServer, params: t.DocumentFormattingParams) -> list[t.TextEdit] | None:
        def answer() -> list[t.TextEdit] | None:
            a = ls.analysis(params.text_document.uri)
            if a is None:
                return None
            text = an.formatted(a)
            if text is None or text == a.text:
                return [] if text is not None else None
            end = t.Position(line=len(a.lines), character=0)
            return [t.TextEdit(range=t.Range(t.Position(line=0, character=0), end), new_text=text)]

        return guarded("formatting", answer)

    @server.feature(t.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def document_symbol(ls: SophonLanguageServer, params: t.DocumentSymbolParams) -> list[t.DocumentSymbol]:
        def answer() -> list[t.DocumentSymbol]:
            a = ls.analysis(params.text_document.uri)
            if a is None:
                return []

            def convert(s: an.Symbol) -> t.DocumentSymbol:
                rng = ls.to_range(a.lines, s.span)
                sel = ls.to_range(a.lines, s.selection)
                if not _inside(sel, rng):
                    sel = rng
                return t.DocumentSymbol(name=s.name, detail=s.detail, kind=t.SymbolKind.Function, range=rng,
                                        selection_range=sel, children=[convert(c) for c in s.children] or None)

            return [convert(s) for s in an.symbols(a)]

        return guarded("symbols", answer, [])

    @server.feature(t.TEXT_DOCUMENT_RENAME)
    def rename(ls: SophonLanguageServer, params: t.RenameParams) -> t.WorkspaceEdit | None:
        def answer() -> t.WorkspaceEdit | None:
            uri = params.text_document.uri
            a = ls.analysis(uri)
            if a is None:
                return None
            edits = an.rename(a, *ls.from_position(a.lines, params.position), params.new_name)
            if not edits:
                return None
            return t.WorkspaceEdit(changes={uri: [t.TextEdit(range=ls.to_range(a.lines, s), new_text=new)
                                                  for s, new in edits]})

        return guarded("rename", answer)

    @server.feature(t.TEXT_DOCUMENT_CODE_ACTION,
                    t.CodeActionOptions(code_action_kinds=[t.CodeActionKind.QuickFix]))
    def code_action(ls: SophonLanguageServer, params: t.CodeActionParams) -> list[t.CodeAction] | None:
        def answer() -> list[t.CodeAction] | None:
            uri = params.text_document.uri
            a = ls.analysis(uri)
            if a is None:
                return None
            start = ls.from_position(a.lines, params.range.start)
            end = ls.from_position(a.lines, params.range.end)
            near = [d for d in a.diagnostics if d.span is not None
                    and (d.span.line, d.span.column) <= end and start <= (d.span.end_line, d.span.end_column)]
            out = []
            for d, span, new, title in an.quick_fixes(a, near):
                out.append(t.CodeAction(
                    title=title, kind=t.CodeActionKind.QuickFix, diagnostics=[ls.to_lsp(uri, a, d)],
                    is_preferred=True,
                    edit=t.WorkspaceEdit(changes={uri: [t.TextEdit(range=ls.to_range(a.lines, span), new_text=new)]})))
            return out or None

        return guarded("code action", answer)

    return server


def _inside(inner: t.Range, outer: t.Range) -> bool:
    key = lambda p: (p.line, p.character)
    return key(outer.start) <= key(inner.start) and key(inner.end) <= key(outer.end)


_KINDS = {"tool": t.CompletionItemKind.Function, "param": t.CompletionItemKind.Field,
          "path": t.CompletionItemKind.Variable, "attribute": t.CompletionItemKind.Property,
          "keyword": t.CompletionItemKind.Keyword}


def serve(debounce: float = 0.05) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")  # stderr: stdout is the protocol
    build(debounce).start_io()
