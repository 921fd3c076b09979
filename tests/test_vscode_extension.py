"""The VS Code extension (issue 28 item 8): its TextMate grammar against the annotated
samples in editors/vscode/tests (vscode-tmgrammar-test), and ``vsce package`` building the
.vsix, both with the npm packages pinned in editors/vscode/package-lock.json.

CI runs the README's test command only, so the npm side runs from here: ``npm ci`` (when
node_modules is missing or older than the lockfile), ``npm test``, then vsce.  Without npm
the test is skipped on a developer's machine and fails in CI (``$CI`` set), where Node is
part of the machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

EXT = Path(__file__).resolve().parents[1] / "editors" / "vscode"


def npm() -> str:
    found = shutil.which("npm")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("npm is not on PATH: CI runs the VS Code grammar tests with Node 20")
        pytest.skip("npm is not on PATH (the VS Code grammar tests need Node)")
    return found


@pytest.fixture(scope="module")
def installed() -> str:
    exe = npm()
    stamp = EXT / "node_modules" / ".package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < (EXT / "package-lock.json").stat().st_mtime:
        proc = subprocess.run([exe, "ci", "--no-audit", "--no-fund"], cwd=EXT, capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return exe


def test_grammar_samples(installed):
    proc = subprocess.run([installed, "test"], cwd=EXT, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    samples = sorted(p.name for p in (EXT / "tests").glob("*.plan"))
    assert len(samples) >= 3
    for name in samples:
        assert f"tests/{name} run successfuly" in out, out


def test_vsce_package_builds_the_vsix(installed, tmp_path):
    out = tmp_path / "sophon-dsl.vsix"
    proc = subprocess.run([installed, "exec", "--no", "--", "vsce", "package", "--out", str(out)], cwd=EXT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        manifest = json.loads(z.read("extension/package.json"))
    assert {"extension/syntaxes/sophon.tmLanguage.json", "extension/language-configuration.json",
            "extension/extension.js"} <= names
    assert any(n.startswith("extension/node_modules/vscode-languageclient/") for n in names)
    assert not any(n.startswith("extension/tests/") for n in names)
    assert manifest["contributes"]["languages"][0]["extensions"] == [".plan", ".sophon", ".dsl"]


def test_grammar_names_what_the_issue_lists():
    grammar = json.loads((EXT / "syntaxes" / "sophon.tmLanguage.json").read_text(encoding="utf-8"))
    repo = grammar["repository"]
    assert grammar["scopeName"] == "source.sophon"
    for rule in ("comment", "string-double", "string-single", "reference", "attribute", "number", "keyword",
                 "operator"):
        assert rule in repo, rule
    assert "map|return|as" in repo["keyword"]["match"]
