"""Issue 17, Medium 6 (and the Low FIFO item): the files sandbox opens what it checked.

The race is made deterministic: the check (resolve_in_sandbox) is wrapped so that, right
after it returns, a directory on the checked path is swapped for a symlink leading out,
which is what a concurrent process did 82 times in 20,000 reads before the fix.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from stdlib_tools import StdlibConfig, files as files_module
from stdlib_tools.errors import ToolError

from stdlib_helpers import tools_by_name


@pytest.fixture
def setup(tmp_path):
    sandbox = tmp_path / "sandbox"
    (sandbox / "d").mkdir(parents=True)
    (sandbox / "d" / "notes.txt").write_text("inside", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("OUTSIDE-SECRET", encoding="utf-8")
    tools = tools_by_name(StdlibConfig(sandbox_root=sandbox, files_max_bytes=1000), ["files", "documents"])
    return sandbox, outside, tools


def _swap_after_check(monkeypatch: Any, sandbox: Path, outside: Path) -> None:
    real_check = files_module.resolve_in_sandbox

    def check_then_swap(root: Path, path: Any, **kw: Any) -> Path:
        found = real_check(root, path, **kw)
        if (sandbox / "d").is_dir() and not (sandbox / "d").is_symlink():
            shutil.rmtree(sandbox / "d")
            os.symlink(outside, sandbox / "d")
        return found

    monkeypatch.setattr(files_module, "resolve_in_sandbox", check_then_swap)


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed_on_read(setup, monkeypatch):
    sandbox, outside, tools = setup
    _swap_after_check(monkeypatch, sandbox, outside)
    with pytest.raises(ToolError) as info:
        tools["files.read"](path="d/notes.txt")
    assert info.value.code == "Files.OutsideSandbox"


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed_on_write(setup, monkeypatch):
    sandbox, outside, tools = setup
    _swap_after_check(monkeypatch, sandbox, outside)
    with pytest.raises(ToolError) as info:
        tools["files.write"](path="d/notes.txt", content="pwned")
    assert info.value.code == "Files.OutsideSandbox"
    assert (outside / "notes.txt").read_text(encoding="utf-8") == "OUTSIDE-SECRET"


def test_a_hard_link_to_a_file_outside_is_neither_read_nor_written(setup):
    sandbox, outside, tools = setup
    os.link(outside / "notes.txt", sandbox / "hard.txt")
    for name, kwargs in (("files.read", {}), ("files.write", {"content": "pwned"}),
                         ("files.write", {"content": "pwned", "mode": "append"}),
                         ("document.create", {"rows": [{"a": 1}], "format": "csv"})):
        with pytest.raises(ToolError) as info:
            tools[name](path="hard.txt", **kwargs)
        assert info.value.code == "Files.HardLink", name
    assert (outside / "notes.txt").read_text(encoding="utf-8") == "OUTSIDE-SECRET"


def test_the_size_limit_is_per_file_not_per_write(setup):
    sandbox, _, tools = setup
    tools["files.write"](path="log.txt", content="x" * 600)
    with pytest.raises(ToolError) as info:
        tools["files.write"](path="log.txt", content="y" * 600, mode="append")
    assert info.value.code == "Files.TooLarge"
    assert (sandbox / "log.txt").read_text(encoding="utf-8") == "x" * 600
    tools["files.write"](path="log.txt", content="z" * 600)  # overwrite replaces: 600 bytes
    assert (sandbox / "log.txt").read_text(encoding="utf-8") == "z" * 600


def test_a_fifo_in_the_sandbox_does_not_hang_the_reader(setup):
    sandbox, _, tools = setup
    os.mkfifo(sandbox / "pipe")
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            tools["files.read"](path="pipe")
        except ToolError as exc:
            box["code"] = exc.code

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():  # unblock the reader before failing
        with open(sandbox / "pipe", "w") as fh:
            fh.write("x")
        pytest.fail("files.read blocked on a FIFO")
    assert box["code"] == "Files.NotARegularFile"


def test_listing_walks_by_descriptor_and_reports_links(setup, monkeypatch):
    sandbox, outside, tools = setup
    os.symlink(outside, sandbox / "out")
    listing = tools["files.list"](recursive=True)
    assert {e["path"]: e["type"] for e in listing["entries"]} == {
        "d": "dir", "d/notes.txt": "file", "out": "symlink"}
    _swap_after_check(monkeypatch, sandbox, outside)
    with pytest.raises(ToolError) as info:
        tools["files.list"](path="d")
    assert info.value.code == "Files.OutsideSandbox"
