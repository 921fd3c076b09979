"""files.read / files.write / files.list and document.create confined to the sandbox root."""

from __future__ import annotations

import csv
import io
import os

import pytest

from stdlib_tools import StdlibConfig
from stdlib_tools.errors import ToolError
from stdlib_tools.sandbox import resolve_in_sandbox

from stdlib_helpers import tools_by_name


@pytest.fixture
def ft(sandbox):
    return tools_by_name(StdlibConfig(sandbox_root=sandbox), ["files", "documents"])


def test_write_read_list_roundtrip(ft, sandbox):
    w = ft["files.write"](path="notes/today.txt", content="héllo")
    assert w == {"path": "notes/today.txt", "bytes_written": 6, "created": True}
    assert (sandbox / "notes" / "today.txt").read_text() == "héllo"
    assert ft["files.write"](path="notes/today.txt", content=" world", mode="append")["created"] is False
    r = ft["files.read"](path="notes/today.txt")
    assert r == {"path": "notes/today.txt", "content": "héllo world", "size": 12, "truncated": False}
    listing = ft["files.list"]()
    assert listing["path"] == "." and listing["entries"] == [
        {"name": "notes", "path": "notes", "type": "dir", "size": None}]
    rec = ft["files.list"](recursive=True, pattern="*.txt")
    assert [e["path"] for e in rec["entries"]] == ["notes/today.txt"]


def test_create_mode_refuses_existing(ft):
    ft["files.write"](path="a.txt", content="1")
    with pytest.raises(ToolError) as err:
        ft["files.write"](path="a.txt", content="2", mode="create")
    assert err.value.code == "Files.Exists"


def test_read_errors_and_cap(sandbox):
    t = tools_by_name(StdlibConfig(sandbox_root=sandbox, files_max_bytes=10), ["files"])
    (sandbox / "big.txt").write_text("x" * 50)
    out = t["files.read"](path="big.txt")
    assert out["truncated"] is True and out["content"] == "x" * 10 and out["size"] == 50
    with pytest.raises(ToolError) as err:
        t["files.read"](path="missing.txt")
    assert err.value.code == "Files.NotFound"
    (sandbox / "d").mkdir()
    with pytest.raises(ToolError) as err:
        t["files.read"](path="d")
    assert err.value.code == "Files.IsADirectory"
    with pytest.raises(ToolError) as err:
        t["files.write"](path="w.txt", content="y" * 11)
    assert err.value.code == "Files.TooLarge"


@pytest.mark.parametrize("path", [
    "../outside.txt", "../../etc/passwd", "a/../../outside.txt", "./../outside.txt",
    "/etc/passwd", "/tmp/outside.txt", "~/outside.txt", "a/b/../../../outside.txt",
])
def test_escapes_are_refused(ft, sandbox, path):
    (sandbox.parent / "outside.txt").write_text("secret")
    for name, kwargs in (("files.read", {}), ("files.write", {"content": "x"}),
                         ("document.create", {"rows": [{"a": 1}], "format": "csv"})):
        with pytest.raises(ToolError) as err:
            ft[name](path=path, **kwargs)
        assert err.value.code == "Files.OutsideSandbox", (name, path)
    assert (sandbox.parent / "outside.txt").read_text() == "secret"


def test_list_escape_is_refused(ft):
    for path in ("..", "/", "../..", "/etc"):
        with pytest.raises(ToolError) as err:
            ft["files.list"](path=path)
        assert err.value.code == "Files.OutsideSandbox"


def test_dotdot_that_stays_inside_is_fine(ft, sandbox):
    ft["files.write"](path="a/../b.txt", content="ok")
    assert (sandbox / "b.txt").read_text() == "ok"


def test_absolute_path_inside_the_root_is_fine(ft, sandbox):
    ft["files.write"](path=str(sandbox / "abs.txt"), content="ok")
    assert ft["files.read"](path=str(sandbox / "abs.txt"))["content"] == "ok"


def test_symlink_escapes_are_refused(ft, sandbox, tmp_path):
    outside_dir = tmp_path / "outside_dir"
    outside_dir.mkdir()
    (outside_dir / "secret.txt").write_text("secret")
    os.symlink(outside_dir / "secret.txt", sandbox / "link.txt")        # file link out
    os.symlink(outside_dir, sandbox / "linkdir")                          # dir link out
    os.symlink("../outside_dir/secret.txt", sandbox / "rel.txt")          # relative link out
    os.symlink("/etc", sandbox / "etc")
    for path in ("link.txt", "linkdir/secret.txt", "rel.txt", "etc/passwd"):
        with pytest.raises(ToolError) as err:
            ft["files.read"](path=path)
        assert err.value.code == "Files.OutsideSandbox", path
    for path in ("link.txt", "linkdir/new.txt", "linkdir/sub/new.txt"):
        with pytest.raises(ToolError) as err:
            ft["files.write"](path=path, content="pwned")
        assert err.value.code == "Files.OutsideSandbox", path
    with pytest.raises(ToolError) as err:
        ft["files.list"](path="linkdir")
    assert err.value.code == "Files.OutsideSandbox"
    assert (outside_dir / "secret.txt").read_text() == "secret"
    assert sorted(os.listdir(outside_dir)) == ["secret.txt"]
    # listing the root reports links without following them
    listing = ft["files.list"](recursive=True)
    kinds = {e["name"]: e["type"] for e in listing["entries"]}
    assert kinds == {"etc": "symlink", "link.txt": "symlink", "linkdir": "symlink", "rel.txt": "symlink"}


def test_symlink_inside_the_root_is_fine(ft, sandbox):
    (sandbox / "real.txt").write_text("data")
    os.symlink("real.txt", sandbox / "alias.txt")
    assert ft["files.read"](path="alias.txt") == {"path": "real.txt", "content": "data", "size": 4,
                                                  "truncated": False}


def test_sandbox_root_itself_behind_a_symlink(tmp_path):
    real = tmp_path / "real_root"
    real.mkdir()
    os.symlink(real, tmp_path / "root_link")
    t = tools_by_name(StdlibConfig(sandbox_root=tmp_path / "root_link"), ["files"])
    t["files.write"](path="x.txt", content="1")
    assert (real / "x.txt").read_text() == "1"


def test_nul_byte_and_root_target(ft, sandbox):
    with pytest.raises(ToolError) as err:
        ft["files.read"](path="a\x00b")
    assert err.value.code == "Files.InvalidPath"
    with pytest.raises(ToolError) as err:
        ft["files.write"](path=".", content="x")
    assert err.value.code == "Files.InvalidPath"
    with pytest.raises(ToolError):
        resolve_in_sandbox(sandbox.resolve(), "..")


def test_document_csv(ft, sandbox):
    rows = [{"name": "Acme", "price": 10, "features": ["a", "b"]},
            {"name": "Globex", "price": 12.5, "notes": "=HYPERLINK(\"x\")"},
            {"name": "Initech", "price": -3, "notes": "-5"}]
    out = ft["document.create"](path="reports/competitors.csv", rows=rows)
    assert out == {"path": "reports/competitors.csv", "format": "csv", "rows": 3,
                   "columns": ["name", "price", "features", "notes"],
                   "bytes": (sandbox / "reports/competitors.csv").stat().st_size}
    parsed = list(csv.reader(io.StringIO((sandbox / "reports/competitors.csv").read_text())))
    assert parsed == [["name", "price", "features", "notes"],
                      ["Acme", "10", '["a", "b"]', ""],
                      ["Globex", "12.5", "", "'=HYPERLINK(\"x\")"],   # formula defused
                      ["Initech", "-3", "", "-5"]]                      # numbers untouched


def test_document_markdown(ft, sandbox):
    out = ft["document.create"](path="table.md", rows=[["Acme", "a|b"], ["Globex", "line1\nline2"]],
                                columns=["Company", "Notes"], title="Competitors")
    assert out["format"] == "markdown" and out["rows"] == 2
    assert (sandbox / "table.md").read_text() == (
        "# Competitors\n\n| Company | Notes |\n| --- | --- |\n| Acme | a\\|b |\n"
        "| Globex | line1<br>line2 |\n")


def test_document_errors(ft, sandbox):
    with pytest.raises(ToolError) as err:
        ft["document.create"](path="x.txt", rows=[{"a": 1}])
    assert err.value.code == "Document.UnknownFormat"
    with pytest.raises(ToolError) as err:
        ft["document.create"](path="x.csv", rows=[{"a": 1}, [1]])
    assert err.value.code == "Document.InvalidRows"
    ft["document.create"](path="x.csv", rows=[[1, 2]])
    assert (sandbox / "x.csv").read_text() == "column1,column2\n1,2\n"
    with pytest.raises(ToolError) as err:
        ft["document.create"](path="x.csv", rows=[[1]], overwrite=False)
    assert err.value.code == "Files.Exists"
