"""A code block the docs mark `<!-- snippet: PATH -->` is a contiguous part of PATH's text.

README.md once showed examples/competitors.plan in its old `†` spelling after the file had
been rewritten in fmt's layout; the marker keeps the copy and the file in step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKED = re.compile(r"<!-- snippet: (\S+) -->\n```[^\n]*\n(.*?)^```", re.S | re.M)


def _snippets():
    for doc in DOCS:
        for found in MARKED.finditer(doc.read_text(encoding="utf-8")):
            yield pytest.param(doc, found.group(1), found.group(2),
                               id=f"{doc.relative_to(ROOT).as_posix()}:{found.group(1)}")


SNIPPETS = list(_snippets())


def test_the_readme_shows_the_competitors_plan_as_a_marked_snippet():
    assert any(p.values[0].name == "README.md" and p.values[1] == "examples/competitors.plan" for p in SNIPPETS)


@pytest.mark.parametrize(("doc", "path", "snippet"), SNIPPETS)
def test_snippet_is_a_contiguous_part_of_its_file(doc, path, snippet):
    text = (ROOT / path).read_text(encoding="utf-8")
    lines, part = text.splitlines(), snippet.splitlines()
    assert part, f"{doc.name}: the snippet of {path} is empty"
    starts = [i for i in range(len(lines) - len(part) + 1) if lines[i:i + len(part)] == part]
    assert starts, f"{doc.name}: the snippet of {path} is not a run of whole lines of the file; copy it again"
