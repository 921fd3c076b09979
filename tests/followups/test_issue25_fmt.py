"""Issue 25 item 6: `fmt -w` writes through symlinks and refuses read-only files; `fmt`
keeps CRLF line endings and a UTF-8 BOM, and comments inside a map body at their calls."""

from __future__ import annotations

import os
import stat

import pytest

from sophon_dsl.cli import main

UNFORMATTED = '$state.a   = f(x=1)\n'
MAP = """$state.items = list_items()
# the map
$state.out = map($state.items, as=it) {
  # before the body call
  $local.r = bump(x=$it)   # bump
  return $local.r
}
"""


def test_fmt_w_writes_through_a_symlink(tmp_path, capsys):
    target = tmp_path / "real.plan"
    target.write_text(UNFORMATTED, encoding="utf-8")
    link = tmp_path / "link.plan"
    link.symlink_to(target)
    assert main(["fmt", "-w", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text(encoding="utf-8") == "$state.a = f(x=1)\n"


def test_fmt_w_refuses_a_read_only_file(tmp_path, capsys):
    path = tmp_path / "ro.plan"
    path.write_text(UNFORMATTED, encoding="utf-8")
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        assert main(["fmt", "-w", str(path)]) == 2
        assert "read-only" in capsys.readouterr().err
        assert path.read_text(encoding="utf-8") == UNFORMATTED
        assert not path.stat().st_mode & 0o222
    finally:
        path.chmod(0o644)


@pytest.mark.parametrize("ext, body", [(".plan", '$state.a   = f(x=1)\n$state.b = f(x=2)\n'),
                                       (".json", '[{"_tool": "f",   "x": 1}]\n')])
def test_fmt_keeps_crlf_and_the_bom(tmp_path, capsys, ext, body):
    path = tmp_path / f"p{ext}"
    path.write_bytes(b"\xef\xbb\xbf" + body.replace("\n", "\r\n").encode())
    assert main(["fmt", "-w", str(path)]) == 0
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and raw.count(b"\r\n") == raw.count(b"\n") > 0
    capsys.readouterr()
    assert main(["fmt", "--check", str(path)]) == 0       # formatted as it is now
    assert main(["fmt", "-w", str(path)]) == 0
    assert "already formatted" in capsys.readouterr().err


def test_fmt_keeps_comments_inside_a_map_body(tmp_path, capsys):
    path = tmp_path / "m.plan"
    path.write_text(MAP, encoding="utf-8")
    assert main(["fmt", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == ("$state.items = list_items()\n"
                   "# the map\n"
                   "$state.out = map($state.items, as=it) {\n"
                   "    # before the body call\n"
                   "    $local.r = bump(x=$it)  # bump\n"
                   "    return $local.r\n"
                   "}\n")
    path.write_text(out, encoding="utf-8")
    assert main(["fmt", "--check", str(path)]) == 0
