"""Helpers of the language-server tests. The server under test: ``python -m sophon_dsl lsp`` in a subprocess, driven by
pytest-lsp's client over stdio (a real LSP client: Content-Length framing, initialize,
notifications), in a project whose ``sophon.toml`` names a tools file."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")
pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types as t  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def make_project(base: Path) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "examples" / "competitors_tools.py", base / "tools.py")
    (base / "sophon.toml").write_text('tools = ["tools.py"]\nplans = ["*.yaml", "*.json"]\n', encoding="utf-8")
    return base


def server_config(debounce: str = "0.02") -> ClientServerConfig:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return ClientServerConfig(server_command=[sys.executable, "-m", "sophon_dsl", "lsp", "--debounce", debounce],
                              server_env=env)


async def start(client: LanguageClient, root: Path) -> t.InitializeResult:
    return await client.initialize_session(t.InitializeParams(
        capabilities=pytest_lsp.client_capabilities("visual-studio-code"),
        root_uri=root.as_uri(), workspace_folders=[t.WorkspaceFolder(uri=root.as_uri(), name="p")]))


async def diagnostics_for(client: LanguageClient, uri: str, until=lambda ds: True, wait: float = 60.0):
    """The diagnostics published for ``uri`` once ``until`` holds (polls; a generous bound,
    not a timing assertion)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + wait
    while True:
        found = client.diagnostics.get(uri)
        if found is not None and until(found):
            return found
        if loop.time() > end:
            raise AssertionError(f"no matching diagnostics for {uri}: {found}")
        await asyncio.sleep(0.02)


def open_doc(client: LanguageClient, path: Path, text: str, language: str = "sophon", version: int = 1) -> str:
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    client.diagnostics.pop(uri, None)
    client.text_document_did_open(t.DidOpenTextDocumentParams(
        text_document=t.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)))
    return uri


def change(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[t.TextDocumentContentChangeWholeDocument(text=text)]))
