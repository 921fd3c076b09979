"""``document.create``: write a table as CSV or Markdown into the sandbox root
(the seed's comparison spreadsheet)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from typing import Annotated, Any, Literal

from typing_extensions import TypedDict

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from ._common import Field, make_tool
from .config import StdlibConfig, uses_config
from .errors import ToolError
from .sandbox import open_in_sandbox, relative_to_root, resolve_in_sandbox

__all__ = ["build", "DocumentResult", "render_csv", "render_markdown", "normalize_rows"]

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


class DocumentResult(TypedDict):
    path: str
    format: Literal["csv", "markdown"]
    rows: int
    columns: list[str]
    bytes: int


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(v, ensure_ascii=False)


def normalize_rows(rows: list[Any], columns: list[str] | None) -> tuple[list[str], list[list[str]]]:
    """Rows of objects (columns: given, else keys in first-seen order) or of lists."""
    if not isinstance(rows, list):
        raise ToolError("Document.InvalidRows", "rows must be a list")
    if all(isinstance(r, dict) for r in rows):
        cols = list(columns) if columns else []
        if not columns:
            for r in rows:
                for k in r:
                    if k not in cols:
                        cols.append(str(k))
        return cols, [[_cell(r.get(c)) for c in cols] for r in rows]
    if all(isinstance(r, list) for r in rows):
        width = max((len(r) for r in rows), default=0)
        cols = list(columns) if columns else [f"column{i + 1}" for i in range(width)]
        if any(len(r) > len(cols) for r in rows):
            raise ToolError("Document.InvalidRows", "a row has more cells than there are columns")
        return cols, [[_cell(v) for v in r] + [""] * (len(cols) - len(r)) for r in rows]
    raise ToolError("Document.InvalidRows", "rows must all be objects or all be lists")


def _defuse(cell: str) -> str:
    """Spreadsheet formula injection: a text cell starting with = + - @ is prefixed with '."""
    if cell and cell[0] in "=+-@\t\r" and not _NUMBER.match(cell):
        return "'" + cell
    return cell


def render_csv(columns: list[str], rows: list[list[str]], *, escape_formulas: bool = True) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    fix = _defuse if escape_formulas else (lambda c: c)
    w.writerow([fix(c) for c in columns])
    for r in rows:
        w.writerow([fix(c) for c in r])
    return buf.getvalue()


def _md(cell: str) -> str:
    return cell.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")


def render_markdown(columns: list[str], rows: list[list[str]], title: str | None = None) -> str:
    lines = []
    if title:
        lines += [f"# {title.strip()}", ""]
    lines.append("| " + " | ".join(_md(c) for c in columns) + " |")
    lines.append("|" + "|".join(" --- " for _ in columns) + "|")
    for r in rows:
        lines.append("| " + " | ".join(_md(c) for c in r) + " |")
    return "\n".join(lines) + "\n"


@uses_config("sandbox_root", "files_max_bytes")
def build(config: StdlibConfig) -> list[ToolSpec]:
    root = config.root

    def create(path: Annotated[str, Field(description='file to write, relative to the sandbox root, '
                                          'e.g. "reports/competitors.csv"')],
               rows: Annotated[list[dict[str, Any]] | list[list[Any]],
                               Field(description="objects (one per row) or lists of cells")],
               columns: Annotated[list[str] | None, Field(
                   description="column order / header; default: the keys of the rows")] = None,
               format: Annotated[Literal["csv", "markdown"] | None, Field(
                   description="default: from the extension (.csv, .md)")] = None,
               title: Annotated[str | None, Field(description="Markdown heading")] = None,
               overwrite: bool = True) -> DocumentResult:
        real = resolve_in_sandbox(root, path, allow_root=False)
        fmt = format
        if fmt is None:
            ext = real.suffix.lower()
            fmt = "csv" if ext == ".csv" else "markdown" if ext in (".md", ".markdown") else None
            if fmt is None:
                raise ToolError("Document.UnknownFormat",
                                f"cannot tell the format of {path!r}: give format=csv or markdown")
        if fmt not in ("csv", "markdown"):
            raise ToolError("Document.UnknownFormat", f"unsupported format {fmt!r}")
        cols, cells = normalize_rows(rows, columns)
        text = render_csv(cols, cells) if fmt == "csv" else render_markdown(cols, cells, title)
        data = text.encode("utf-8")
        if len(data) > config.files_max_bytes:
            raise ToolError("Files.TooLarge", f"document is {len(data)} bytes; the limit is "
                            f"{config.files_max_bytes}")
        try:  # openat-style, no symlink followed, one link only (stdlib_tools.sandbox)
            fd = open_in_sandbox(root, real, os.O_WRONLY | os.O_CREAT | os.O_EXCL, shown=path, make_dirs=True)
        except FileExistsError:
            if not overwrite:
                raise ToolError("Files.Exists", f"{path!r} already exists") from None
            try:
                fd = open_in_sandbox(root, real, os.O_WRONLY, shown=path)
            except ToolError:
                raise
            except OSError as exc:
                raise ToolError("Files.Error", f"cannot write {path!r}: {exc.strerror}") from None
        except ToolError:
            raise
        except OSError as exc:
            raise ToolError("Files.Error", f"cannot write {path!r}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as fh:
            os.ftruncate(fh.fileno(), 0)
            fh.write(data)
        return DocumentResult(path=relative_to_root(root, real), format=fmt, rows=len(cells),
                              columns=cols, bytes=len(data))

    return [make_tool(create, "document.create", Risk.MEDIUM,
                      "Write a table (rows of objects or lists) as a CSV file or a Markdown table into "
                      "the sandbox root, e.g. a comparison spreadsheet.")]
