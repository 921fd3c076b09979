"""Generate ``sophon_dsl/syntax/_lalr_parser.py``, the DSL's parser, from ``grammar/sophon.lark``.

Run ``python grammar/generate_parser.py`` after changing the grammar (needs ``lark``, a
dependency of the package).  The output is Lark's standalone parser (what
``python -m lark.tools.standalone -l basic grammar/sophon.lark`` writes, with the options of
``sophon_dsl/syntax/lalr_options.py``): the parse tables as Python literals plus the part of
Lark that runs them.  Importing it is cheaper than importing ``lark`` and loading cached
tables, which is why ``check``/``run`` use it (issue 30 item 11; docs/performance.md).

The generator is called as a function rather than through its command line because the
command line cannot give a post-lexer, and the post-lexer's always-accepted terminals
(``_SEMI``) shape the tables.  ``tests/test_generated_parser.py`` checks that the committed
module was generated from the current grammar and parses every example as ``lark.Lark`` does.

The generated code is under the Mozilla Public License 2.0 (Lark's standalone tool; its
notice is kept in the file); the rest of sophon-dsl is MIT.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRAMMAR = ROOT / "grammar" / "sophon.lark"
OUTPUT = ROOT / "sophon_dsl" / "syntax" / "_lalr_parser.py"
OPTIONS_FILE = ROOT / "sophon_dsl" / "syntax" / "lalr_options.py"

# Lark's utils section imports the `regex` package when it is installed (~25 ms), for
# grammars with Unicode categories (\p{...}); ours has none, so the generated module uses `re`.
REGEX_BLOCK = "try:\n    import regex\n    _has_regex = True\nexcept ImportError:\n    _has_regex = False\n"
REGEX_REPLACEMENT = "_has_regex = False  # (sophon-dsl: the grammar uses no Unicode categories; see the header)\n"
# The standalone module imports pickle, zlib and base64 to decode compressed tables (the
# generator's -c); ours are Python literals, and Lark's own uses of pickle (Lark.save, .load
# and the cache option) are not reachable from Lark_StandAlone: the import costs ~8 ms.
PICKLE_IMPORT = "import pickle, zlib, base64\nDATA = (\n"
# Lark logs to the "lark" logger, set to CRITICAL, only at levels below it (debug, info,
# warning, exception): nothing is ever shown, and importing logging costs `check` ~6 ms.
LOGGING_BLOCK = (
    "import sys, re\nimport logging\nfrom dataclasses import dataclass\nfrom typing import Generic, AnyStr\n\n"
    'logger: logging.Logger = logging.getLogger("lark")\nlogger.addHandler(logging.StreamHandler())\n##\n\n##\n\n'
    "logger.setLevel(logging.CRITICAL)\n")
LOGGING_REPLACEMENT = (
    "import sys, re\nfrom dataclasses import dataclass\nfrom typing import Generic, AnyStr\n\n\n"
    "class _Silent:  # (sophon-dsl: in place of the \"lark\" logger at CRITICAL; see the header)\n"
    "    def _drop(self, *args, **kwargs):\n        pass\n\n    debug = info = warning = exception = _drop\n\n\n"
    "logger = _Silent()\n")


def _options() -> tuple[dict, tuple[str, ...]]:
    # loaded from its file: importing the package would import the generated module
    spec = importlib.util.spec_from_file_location("_sophon_lalr_options", OPTIONS_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.LARK_OPTIONS), tuple(module.ALWAYS_ACCEPT)


class _AlwaysAccept:
    """Stands in for the post-lexer while the tables are built: Lark reads only
    ``always_accept`` then; the real post-lexer is given when the parser is loaded."""

    def __init__(self, always_accept: tuple[str, ...]) -> None:
        self.always_accept = always_accept

    def process(self, stream):  # pragma: no cover - never called while generating
        return stream


def grammar_digest(data: bytes) -> str:
    """The hash in the header: of the file's bytes (tests/test_generated_parser.py compares it)."""
    return hashlib.sha256(data).hexdigest()


def generate() -> str:
    """The module's text."""
    import lark
    from lark.tools.standalone import gen_standalone

    raw = GRAMMAR.read_bytes()
    grammar = raw.decode("utf-8")
    options, always_accept = _options()
    parser = lark.Lark(grammar, **options, postlex=_AlwaysAccept(always_accept))
    # the options are written into the module as a literal: the stand-in has no literal form,
    # and the parser is loaded with the real post-lexer (Lark_StandAlone(postlex=...))
    parser.options.postlex = None
    out = io.StringIO()
    gen_standalone(parser, out=out)
    body = out.getvalue()
    if body.count(REGEX_BLOCK) != 1:
        raise SystemExit("generate_parser.py: Lark's `try: import regex` block was not found once in "
                         f"the standalone output of Lark {lark.__version__}; update REGEX_BLOCK")
    body = body.replace(REGEX_BLOCK, REGEX_REPLACEMENT)
    if body.count(PICKLE_IMPORT) != 1 or "zlib.decompress" in body:
        raise SystemExit("generate_parser.py: the uncompressed tables' `import pickle, zlib, base64` line was "
                         f"not found once in the standalone output of Lark {lark.__version__}; update PICKLE_IMPORT")
    body = body.replace(PICKLE_IMPORT, "DATA = (\n")
    if body.count(LOGGING_BLOCK) != 1 or body.count("logging.") != LOGGING_BLOCK.count("logging."):
        raise SystemExit("generate_parser.py: Lark's logger set-up was not found once (or logging is used "
                         f"elsewhere) in the standalone output of Lark {lark.__version__}; update LOGGING_BLOCK")
    body = body.replace(LOGGING_BLOCK, LOGGING_REPLACEMENT)
    header = (
        "# GENERATED by grammar/generate_parser.py -- do not edit; regenerate with\n"
        "#     python grammar/generate_parser.py\n"
        f"# grammar: grammar/sophon.lark sha256={grammar_digest(raw)}\n"
        f"# generator: Lark {lark.__version__} standalone (lark.tools.standalone), options "
        f"{sorted(options.items())}, always_accept={list(always_accept)}\n"
        "# Changed from Lark's output: its `try: import regex` block is replaced by `_has_regex = False`,\n"
        "# `import pickle, zlib, base64` above the tables is dropped (Lark.save/.load are not used), and\n"
        "# the \"lark\" logger (at CRITICAL: it never shows Lark's messages) is an object that drops them.\n"
        "# Licence: this file is Lark's standalone parser and is under the Mozilla Public License 2.0\n"
        "# (notice below); the rest of sophon-dsl is MIT.\n"
        "# ruff: noqa\n"
        "# mypy: ignore-errors\n"
    )
    return header + body


def write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # (mkstemp makes it private: an ordinary source file instead)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=OUTPUT, help=f"default: {OUTPUT.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    write_atomically(args.out, generate())
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
