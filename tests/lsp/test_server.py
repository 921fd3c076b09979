"""``sophon-dsl lsp`` over stdio with a real client (issue 28 items 2-7): the initialize
contract, diagnostics equal to ``check``'s, completion, hover, definition, references,
formatting, symbols, rename, code actions, and a tools file that fails or changes."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from lsp_support import ROOT, change, diagnostics_for, make_project, open_doc, server_config, start
from lsprotocol import types as t

import pytest_lsp
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

BASE = Path(tempfile.mkdtemp(prefix="sophon-lsp-"))

PLAN = """\
s1: $state.acme = web.search(query="Acme")
s2: $state.globex = web.serch(query="Globex")
$state.sheet = sheet.create(title="T", rows=[$state.acme, $state.globex])
@risk(medium)
$state.receipt = gmail.send(to=["a@b.c"], subject="S", body=$state.sheet.markdown)
"""


@pytest_lsp.fixture(scope="module", config=server_config())
async def client(lsp_client: LanguageClient):
    make_project(BASE)
    result = await start(lsp_client, BASE)
    lsp_client.init_result = result  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


def pos(text: str, needle: str, offset: int = 0, nth: int = 0) -> t.Position:
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    at += offset
    line = text.count("\n", 0, at)
    return t.Position(line=line, character=at - (text.rfind("\n", 0, at) + 1))


async def test_initialize_reports_the_contract(client: LanguageClient):
    caps = client.init_result.capabilities  # type: ignore[attr-defined]
    assert caps.text_document_sync is not None
    for name in ("completion_provider", "hover_provider", "definition_provider", "references_provider",
                 "document_formatting_provider", "document_symbol_provider", "rename_provider",
                 "code_action_provider"):
        assert getattr(caps, name), name
    assert client.init_result.server_info.name == "sophon-dsl"  # type: ignore[attr-defined]


async def test_diagnostics_are_checks_own(client: LanguageClient):
    path = BASE / "a.plan"
    uri = open_doc(client, path, PLAN)
    diags = await diagnostics_for(client, uri)
    cli = subprocess.run([sys.executable, "-m", "sophon_dsl", "check", str(path), "--format", "json"],
                         cwd=BASE, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    expected = json.loads(cli.stdout)
    assert [(d.code, d.message, d.range.start.line + 1, d.range.start.character + 1,
             d.range.end.line + 1, d.range.end.character + 1) for d in diags] == \
        [(e["code"], e["message"], e["line"], e["column"], e["end_line"], e["end_column"]) for e in expected]
    assert {d.source for d in diags} == {"sophon-dsl"}
    assert [d.code for d in diags] == ["E201"]


async def test_a_change_is_rechecked(client: LanguageClient):
    uri = open_doc(client, BASE / "b.plan", PLAN)
    await diagnostics_for(client, uri, lambda ds: [d.code for d in ds] == ["E201"])
    change(client, uri, PLAN.replace("web.serch", "web.search"), 2)
    await diagnostics_for(client, uri, lambda ds: len(ds) == 0)
    change(client, uri, PLAN + 'sheet.create(title=1, rows=[])\n', 3)
    diags = await diagnostics_for(client, uri, lambda ds: "E204" in [d.code for d in ds])
    assert diags[-1].severity == t.DiagnosticSeverity.Error


async def test_type_mismatch_has_related_information(client: LanguageClient):
    text = '$state.n = web.search(query="x")\ngmail.send(to=["a"], subject="s", body=$state.n)\n'
    uri = open_doc(client, BASE / "c.plan", text)
    diags = await diagnostics_for(client, uri, lambda ds: bool(ds))
    e205 = [d for d in diags if d.code == "E205"]
    assert e205 and e205[0].related_information
    assert e205[0].related_information[0].location.range.start.line == 0  # the writer's line


async def test_yaml_plan_by_the_configs_patterns(client: LanguageClient):
    text = "- _tool: web.serch\n  query: x\n"
    uri = open_doc(client, BASE / "p.yaml", text, language="yaml")
    diags = await diagnostics_for(client, uri, lambda ds: bool(ds))
    assert diags[0].code == "E201" and diags[0].range.start.line == 0


async def test_completion(client: LanguageClient):
    text = '$state.acme = web.search(query="x")\n$state.b = sheet.create(ti\n'
    uri = open_doc(client, BASE / "d.plan", text)
    await diagnostics_for(client, uri)

    async def labels(line: int, character: int) -> dict[str, t.CompletionItem]:
        got = await client.text_document_completion_async(t.CompletionParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=line, character=character)))
        items = got.items if isinstance(got, t.CompletionList) else got
        return {i.label: i for i in items}

    tools = await labels(1, len("$state.b = she"))
    assert "sheet.create" in tools and tools["sheet.create"].detail.startswith("sheet.create(")
    params = await labels(1, len("$state.b = sheet.create(ti"))
    assert list(params) == ["title"] and "required" in params["title"].detail
    change(client, uri, '$state.acme = web.search(query="x")\n$state.b = sheet.create(\n', 2)
    params = await labels(1, len("$state.b = sheet.create("))
    assert list(params)[:2] == ["title", "rows"]
    change(client, uri, '$state.acme = web.search(query="x")\nsheet.create(title=$state.\n', 3)
    paths = await labels(1, len("sheet.create(title=$state."))
    assert "acme" in paths
    change(client, uri, '$state.acme = web.search(query="x")\n@ri\n', 4)
    assert "risk" in await labels(1, 3)


async def test_input_paths_from_the_schema(client: LanguageClient):
    text = ('input = {"type": "object", "properties": {"team": {"type": "array", "items": {"type": "string"}}}}\n'
            'gmail.send(to=$input.\n')
    uri = open_doc(client, BASE / "e.plan", text)
    await diagnostics_for(client, uri)
    got = await client.text_document_completion_async(t.CompletionParams(
        text_document=t.TextDocumentIdentifier(uri=uri),
        position=t.Position(line=1, character=len("gmail.send(to=$input."))))
    assert [i.label for i in got.items] == ["team"]


async def test_hover_tool_reference_and_code(client: LanguageClient):
    uri = open_doc(client, BASE / "f.plan", PLAN)
    await diagnostics_for(client, uri)

    async def hover(p: t.Position) -> str:
        h = await client.text_document_hover_async(
            t.HoverParams(text_document=t.TextDocumentIdentifier(uri=uri), position=p))
        return h.contents.value if h else ""

    tool = await hover(pos(PLAN, "gmail.send", 2))
    assert "gmail.send(to: list[string], subject: string, body: string)" in tool
    assert "risk: **medium**" in tool and "tools.py" in tool
    ref = await hover(pos(PLAN, "$state.acme", 3, nth=1))
    assert "written by **s1**" in ref and "type: `object`" in ref
    code = await hover(pos(PLAN, "web.serch", 2))
    assert "E201" in code and "unknown tool" in code


async def test_definition_and_references(client: LanguageClient):
    uri = open_doc(client, BASE / "g.plan", PLAN)
    await diagnostics_for(client, uri)
    got = await client.text_document_definition_async(t.DefinitionParams(
        text_document=t.TextDocumentIdentifier(uri=uri), position=pos(PLAN, "$state.acme", 2, nth=1)))
    assert [(loc.uri, loc.range.start.line, loc.range.start.character) for loc in got] == [(uri, 0, 4)]
    got = await client.text_document_definition_async(t.DefinitionParams(
        text_document=t.TextDocumentIdentifier(uri=uri), position=pos(PLAN, "sheet.create", 1)))
    src = (BASE / "tools.py").read_text().splitlines()
    assert got[0].uri == (BASE / "tools.py").resolve().as_uri()
    assert src[got[0].range.start.line].startswith("def sheet_create")
    refs = await client.text_document_references_async(t.ReferenceParams(
        text_document=t.TextDocumentIdentifier(uri=uri), position=pos(PLAN, "$state.sheet", 1),
        context=t.ReferenceContext(include_declaration=False)))
    assert [r.range.start.line for r in refs] == [4]


async def test_formatting_symbols_rename_code_action(client: LanguageClient):
    text = 's1:   $state.a=web.search(query="x")\nsheet.create(title="t",rows=[$state.a])\n'
    uri = open_doc(client, BASE / "h.plan", text)
    await diagnostics_for(client, uri)
    edits = await client.text_document_formatting_async(t.DocumentFormattingParams(
        text_document=t.TextDocumentIdentifier(uri=uri), options=t.FormattingOptions(tab_size=4, insert_spaces=True)))
    fmt = subprocess.run([sys.executable, "-m", "sophon_dsl", "fmt", str(BASE / "h.plan")], capture_output=True,
                         text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert edits[0].new_text == fmt.stdout
    syms = await client.text_document_document_symbol_async(t.DocumentSymbolParams(
        text_document=t.TextDocumentIdentifier(uri=uri)))
    assert [(s.name, s.detail) for s in syms] == [("s1", "web.search -> †state.a"), ("c2", "sheet.create")]
    ws = await client.text_document_rename_async(t.RenameParams(
        text_document=t.TextDocumentIdentifier(uri=uri), position=pos(text, "$state.a", 2), new_name="company"))
    assert sorted((e.range.start.line, e.new_text) for e in ws.changes[uri]) == [(0, "$state.company"),
                                                                                 (1, "$state.company")]
    bad = 'web.serch(query="x")\nweb.search(quer="x")\n'
    uri = open_doc(client, BASE / "i.plan", bad)
    diags = await diagnostics_for(client, uri, lambda ds: len(ds) >= 2)
    actions = await client.text_document_code_action_async(t.CodeActionParams(
        text_document=t.TextDocumentIdentifier(uri=uri), range=diags[0].range,
        context=t.CodeActionContext(diagnostics=diags)))
    edit = actions[0].edit.changes[uri][0]
    assert (edit.new_text, edit.range.start.character, edit.range.end.character) == ("web.search", 0, 9)


async def test_tools_file_failing_and_changing(client: LanguageClient):
    proj = make_project(BASE / "broken")
    good = (proj / "tools.py").read_text()
    (proj / "tools.py").write_text(good + "\nraise RuntimeError('boom')\n")
    uri = open_doc(client, proj / "a.plan", PLAN)
    diags = await diagnostics_for(client, uri)
    top = [d for d in diags if d.code == "E110"]
    assert len(top) == 1 and "boom" in top[0].message and top[0].range.start.line == 0
    (proj / "tools.py").write_text(good.replace('name="web.search"', 'name="web.serch"'))
    change(client, uri, PLAN + "\n", 2)
    diags = await diagnostics_for(client, uri, lambda ds: "E110" not in [d.code for d in ds])
    assert [d.message for d in diags if d.code == "E201"] == [
        "unknown tool 'web.search' in call s1; did you mean 'web.serch'?"]


async def test_config_error_is_shown_on_the_plan(client: LanguageClient):
    proj = BASE / "badconfig"
    proj.mkdir(exist_ok=True)
    (proj / "sophon.toml").write_text("strict = 3\n")
    uri = open_doc(client, proj / "a.plan", 'text.split(text="a")\n')
    diags = await diagnostics_for(client, uri)
    assert [d.code for d in diags] == ["E110"] and "sophon.toml:1:1" in diags[0].message


async def test_answers_follow_lines_added_and_removed_above(client: LanguageClient):
    # the statements below an Enter are moved, not parsed again (lsp/incremental.py): the
    # diagnostics, symbols and references after it are at their new lines, and back again
    uri = open_doc(client, BASE / "moved.plan", PLAN)
    await diagnostics_for(client, uri, lambda ds: [d.range.start.line for d in ds] == [1])
    for version, text, shift in ((2, "# two lines\n\n" + PLAN, 2), (3, PLAN, 0), (4, "\n" + PLAN, 1)):
        change(client, uri, text, version)
        diags = await diagnostics_for(client, uri, lambda ds, s=shift: [d.range.start.line for d in ds] == [1 + s])
        assert [d.code for d in diags] == ["E201"]
        syms = await client.text_document_document_symbol_async(t.DocumentSymbolParams(
            text_document=t.TextDocumentIdentifier(uri=uri)))
        assert [s.range.start.line for s in syms] == [shift + k for k in (0, 1, 2, 3)]  # (gmail: its @risk)
        refs = await client.text_document_references_async(t.ReferenceParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=pos(text, "$state.sheet", 1),
            context=t.ReferenceContext(include_declaration=True)))
        assert sorted(r.range.start.line for r in refs) == [2 + shift, 4 + shift]
