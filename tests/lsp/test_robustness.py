"""The server never crashes on bad input (issue 28 item 7): random edits (typing,
deleting, pasting fragments) keep every request answering.

In process, hypothesis drives the analysis behind every request over edited plans, at every
position; over stdio, a real client sends a seeded run of incremental edits with requests
between them, and the server must still answer and publish diagnostics at the end."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from lsp_support import ROOT, diagnostics_for, make_project, open_doc, server_config, start
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types as t

import pytest_lsp
from pytest_lsp import LanguageClient
from sophon_dsl.lsp import analysis as an
from sophon_dsl.tools import ToolRegistry
from sophon_dsl.toolsource import load_tool_sources

SEED = (ROOT / "examples" / "competitors.plan").read_text(encoding="utf-8")
FRAGMENTS = ["$state.", "†state.a", "(", ")", "[", "]", "{", "}", '"', "'", ",", "=", "||", "&&", "<<=", "@risk(",
             "@after(", "map(over=$state.x) {", "return ", "\n", "#", "s1: ", "web.search(", "query=", "†", "††",
             "é", "😋", "\t", "-> {", "input = {", "tool x = {", "$input.team", "\\", "\r\n"]
_TOOLS, _ = load_tool_sources([str(ROOT / "examples" / "competitors_tools.py")])
REGISTRY = ToolRegistry(_TOOLS)


@st.composite
def edited(draw) -> str:
    text = SEED
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["type", "delete", "paste"]))
        if action == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
        elif action == "type":
            text = text[:at] + draw(st.text(max_size=6)) + text[at:]
        else:
            text = text[:at] + draw(st.sampled_from(FRAGMENTS)) + text[at:]
    return text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=edited(), form=st.sampled_from(["dsl", "dsl", "yaml", "json"]), probe=st.integers(0, 10_000))
def test_every_request_answers_on_edited_plans(text, form, probe):
    a = an.analyse(text, form, "p.plan", REGISTRY)
    lines = a.lines
    line = probe % len(lines) + 1
    column = probe % (len(lines[line - 1]) + 1) + 1
    an.complete(a, line, column)
    an.hover(a, line, column)
    an.definition(a, line, column)
    an.find_references(a, line, column, True)
    an.rename(a, line, column, "renamed.path")
    an.symbols(a)
    an.formatted(a)
    an.quick_fixes(a, a.diagnostics)
    for d in a.diagnostics:  # positions stay inside the text
        if d.span is not None:
            assert 1 <= d.span.line <= len(lines) + 1


BASE = Path(tempfile.mkdtemp(prefix="sophon-lsp-fuzz-"))


@pytest_lsp.fixture(scope="module", config=server_config("0"))
async def client(lsp_client: LanguageClient):
    make_project(BASE)
    await start(lsp_client, BASE)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="module")
async def test_server_keeps_answering_through_random_edits(client: LanguageClient):
    rnd = random.Random(28)
    text = SEED
    uri = open_doc(client, BASE / "fuzz.plan", text)
    await diagnostics_for(client, uri)
    doc = t.TextDocumentIdentifier(uri=uri)
    for version in range(2, 62):
        lines = text.split("\n")
        line = rnd.randrange(len(lines))
        char = rnd.randrange(len(lines[line]) + 1)
        start = t.Position(line=line, character=char)
        end = start
        new = rnd.choice(FRAGMENTS)
        if rnd.random() < 0.3 and line + 1 < len(lines):  # delete across a line end
            end = t.Position(line=line + 1, character=min(2, len(lines[line + 1])))
            new = ""
        client.text_document_did_change(t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[t.TextDocumentContentChangePartial(range=t.Range(start, end), text=new)]))
        # keep the client's copy in step (UTF-16 positions: FRAGMENTS' astral char counts 2)
        text = _apply(text, start, end, new)
        probe = t.Position(line=line, character=char)
        await client.text_document_hover_async(t.HoverParams(text_document=doc, position=probe))
        await client.text_document_completion_async(t.CompletionParams(text_document=doc, position=probe))
        await client.text_document_document_symbol_async(t.DocumentSymbolParams(text_document=doc))
        await client.text_document_formatting_async(t.DocumentFormattingParams(
            text_document=doc, options=t.FormattingOptions(tab_size=4, insert_spaces=True)))
    # still checking: a known-good text gets no diagnostics
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=100),
        content_changes=[t.TextDocumentContentChangeWholeDocument(text='$state.a = web.search(query="x")\n')]))
    await diagnostics_for(client, uri, lambda ds: len(ds) == 0)


def _apply(text: str, start: t.Position, end: t.Position, new: str) -> str:
    lines = text.split("\n")

    def offset(p: t.Position) -> int:
        row = lines[p.line]
        units, k = 0, 0
        while k < len(row) and units < p.character:
            units += 2 if ord(row[k]) > 0xFFFF else 1
            k += 1
        return sum(len(r) + 1 for r in lines[:p.line]) + k

    return text[:offset(start)] + new + text[offset(end):]
