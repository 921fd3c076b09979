"""Safe YAML with positions.

:func:`parse_yaml` composes one document with PyYAML's ``SafeLoader`` (no
object construction at all) and converts the node graph into a
:class:`~sophon_dsl.syntax.located.LocatedNode` tree using each node's marks.
It never raises.  Refused with ``E004``:

* tags outside the YAML core/JSON schema (``!!python/...``, ``!custom``,
  ``!!binary``, ``!!set``, ``!!omap``, ``!!pairs``) and merge keys (``<<``);
* aliases that expand the document by more than :data:`MAX_NODES` nodes beyond
  those written (billion laughs), and recursive aliases;
* nesting deeper than :data:`MAX_DEPTH` levels;
* integers over :data:`MAX_INT_DIGITS` digits in any spelling (``0x`` + 5,000 digits);
* ``.nan``, ``.inf``, ``-.inf`` (and floats too large to be finite): JSON has no such number;
* non-scalar mapping keys.

Timestamps stay strings (their source text) so every document is JSON data.
Non-string scalar keys become their JSON spelling (``1``, ``true``, ``null``).
Syntax errors give ``E003`` with the position and PyYAML's description of what
was expected; duplicate keys give ``E108`` (the first is kept).  Surrogate escapes
pair as in JSON (``"\\ud83d\\ude00"`` is one character); a lone one gives ``E006``.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Sequence
from typing import Iterator

import yaml
from yaml.composer import Composer
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ..diagnostics import Diagnostic
import re

from .json_source import LONE_SURROGATE, lone_surrogate_message, lone_surrogates, may_hold_surrogates, size_problem
from .located import ARRAY, OBJECT, SCALAR, LineIndex, LocatedNode, child_path

__all__ = ["parse_yaml", "MAX_NODES", "MAX_DEPTH"]

# Budget of nodes that aliases may add on expansion. Nodes written out in the text cost
# memory in proportion to the text already, so only the copies an alias makes count.
MAX_NODES = 100_000
MAX_DEPTH = 200

_CORE = "tag:yaml.org,2002:"
# a high then a low surrogate: PyYAML decodes each \u escape alone, JSON pairs them
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _paired(text: str) -> str:
    """``text`` with each surrogate pair made the one character it encodes (as JSON reads
    ``"\\ud83d\\ude00"``); lone surrogates stay, for :func:`lone_surrogates` to report."""
    return _PAIR.sub(lambda m: m.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le"), text)


_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null", "timestamp")}


class _TooDeep(Exception):
    def __init__(self, mark):
        self.mark = mark


class _DepthGuard(Composer):
    """A composer that refuses deep nesting before recursing further."""

    _depth = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH + 1:
                raise _TooDeep(self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Loader(_DepthGuard, yaml.SafeLoader):
    """The pure-Python SafeLoader: its error messages are the ones diagnostics quote."""


if getattr(yaml, "__with_libyaml__", False):
    class _FastLoader(_DepthGuard, yaml.CSafeLoader):
        """libyaml scans and parses (about 5x faster); composing stays in Python so that
        the depth guard above still applies (libyaml's own composer recurses in C)."""

        def __init__(self, stream):
            yaml.CSafeLoader.__init__(self, stream)
            Composer.__init__(self)
else:  # pragma: no cover - PyYAML built without libyaml
    _FastLoader = None


def _compose(text: str):
    """``(loader, root node)``; raises what the pure-Python loader raises.

    Marks of both loaders are character offsets. Any problem met on the fast path is
    composed again by the pure-Python loader, so diagnostics word it as they always did.
    """
    if _FastLoader is not None and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        loader = _FastLoader(text)
        try:
            return loader, loader.get_single_node()
        except Exception:  # noqa: BLE001 - the composing path reports what it is
            pass
        finally:
            loader.dispose()
    loader = _Loader(text)
    try:
        return loader, loader.get_single_node()
    finally:
        loader.dispose()


MAX_INT_DIGITS = 4300  # Python's int <-> str limit: a longer integer cannot be written back as JSON
_INT_LIMIT: list[int] = []


def _int_fits(value: int) -> bool:
    """Whether ``value`` has at most MAX_INT_DIGITS decimal digits (PyYAML reads ``0x``,
    ``0o``, ``0b`` and base-60 spellings of any length, which Python's limit lets through)."""
    if value.bit_length() < 14_000:  # fewer than 4,215 digits: the common case, no big compare
        return True
    if not _INT_LIMIT:
        _INT_LIMIT.append(10 ** MAX_INT_DIGITS)
    return abs(value) < _INT_LIMIT[0]


_NOT_FINITE = {True: "not a number (NaN)", False: "infinite"}


class _Refused(Exception):
    def __init__(self, message: str, node, path: str):
        super().__init__(message)
        self.message = message
        self.node = node
        self.path = path


class _Converter:
    def __init__(self, text: str, file: str | None, loader: _Loader):
        self.lines = LineIndex(text)
        self.file = file
        self.loader = loader
        self.diags: list[Diagnostic] = []
        self.pair = may_hold_surrogates(text)

    def span(self, node):
        return self.lines.span(node.start_mark.index, node.end_mark.index)

    def scalar(self, node: ScalarNode, path: str):
        tag = node.tag
        if tag not in _SCALAR_TAGS:
            raise _Refused(f"YAML tag {tag!r} is not allowed: only plain JSON data "
                           "(strings, numbers, booleans, null, lists, mappings)", node, path)
        if tag == _CORE + "str" or tag == _CORE + "timestamp":
            return _paired(node.value) if self.pair else node.value
        try:
            if tag == _CORE + "int":
                value = self.loader.construct_yaml_int(node)
                if not _int_fits(value):
                    raise _Refused(f"integer {node.value[:40]!r}... has more than {MAX_INT_DIGITS:,} digits "
                                   "(hexadecimal, octal and binary spellings included): JSON readers "
                                   "refuse it", node, path)
                return value
            if tag == _CORE + "float":
                value = self.loader.construct_yaml_float(node)
                if not math.isfinite(value):
                    raise _Refused(f"{node.value[:40]!r} is {_NOT_FINITE[math.isnan(value)]}, which JSON "
                                   "has no number for: write a number, or quote it to make it a string",
                                   node, path)
                return value
            if tag == _CORE + "bool":
                return self.loader.construct_yaml_bool(node)
            return None
        except (ValueError, yaml.YAMLError) as exc:
            raise _Refused(f"cannot read scalar {node.value[:40]!r} as {tag[len(_CORE):]}: {exc}",
                           node, path) from None

    def key_text(self, node, path: str) -> str:
        if not isinstance(node, ScalarNode):
            raise _Refused("mapping keys must be scalars (complex keys are not allowed)", node, path)
        if node.tag == _CORE + "merge":
            raise _Refused("merge keys ('<<') are not allowed; write the entries out", node, path)
        val = self.scalar(node, path)
        if isinstance(val, str):
            return val
        try:
            return json.dumps(val)
        except ValueError:
            return node.value

    def convert(self, root) -> LocatedNode:
        """Iterative conversion with an expansion budget and a depth bound."""
        out: list[LocatedNode | None] = [None]
        # (yaml node, path, depth, setter)
        stack = [(root, "$", 0, lambda n: out.__setitem__(0, n))]
        while stack:
            node, path, depth, put = stack.pop()
            if depth > MAX_DEPTH:
                raise _Refused(f"nesting deeper than {MAX_DEPTH} levels (or a recursive alias)",
                               node, path)
            if isinstance(node, ScalarNode):
                put(LocatedNode(SCALAR, self.scalar(node, path), self.span(node), path,
                                quoted=node.style in ("'", '"')))
            elif isinstance(node, SequenceNode):
                if node.tag != _CORE + "seq":
                    raise _Refused(f"YAML tag {node.tag!r} is not allowed on a sequence", node, path)
                items: list = [None] * len(node.value)
                put(LocatedNode(ARRAY, items, self.span(node), path))
                for i in range(len(node.value) - 1, -1, -1):
                    stack.append((node.value[i], child_path(path, i), depth + 1,
                                  (lambda n, i=i, items=items: items.__setitem__(i, n))))
            elif isinstance(node, MappingNode):
                if node.tag != _CORE + "map":
                    raise _Refused(f"YAML tag {node.tag!r} is not allowed on a mapping", node, path)
                entries: list = []
                key_spans: dict = {}
                put(LocatedNode(OBJECT, entries, self.span(node), path, key_spans))
                pending = []
                for knode, vnode in node.value:
                    key = self.key_text(knode, path)
                    cpath = child_path(path, key)
                    if key in key_spans:
                        self.diags.append(Diagnostic(
                            "E108", f"duplicate key {key!r}; the first one is kept",
                            self.span(knode), self.file, cpath))
                        continue
                    key_spans[key] = self.span(knode)
                    slot = len(entries)
                    entries.append((key, None))
                    pending.append((vnode, cpath, slot, key))
                for vnode, cpath, slot, key in reversed(pending):
                    stack.append((vnode, cpath, depth + 1,
                                  (lambda n, s=slot, k=key, e=entries: e.__setitem__(s, (k, n)))))
            else:  # pragma: no cover
                raise _Refused("unsupported YAML node", node, path)
        assert out[0] is not None
        return out[0]


def _check_expansion(root) -> None:
    """Fail fast on alias bombs and recursive aliases, before anything is built.

    The expanded size of every node is memoised, so the walk visits each written node
    once; what aliases add is the expanded size minus the nodes actually written.
    """
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node, path: str, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise _Refused("recursive alias: a node contains itself", node, path)
        if depth > MAX_DEPTH:  # aliases can nest written subtrees deeper than the text does
            raise _Refused(f"nesting deeper than {MAX_DEPTH} levels (or a recursive alias)",
                           node, path)
        total = 1
        if isinstance(node, (SequenceNode, MappingNode)):
            active.add(key)
            children = node.value if isinstance(node, SequenceNode) else \
                [n for pair in node.value for n in pair]
            for child in children:
                total += size(child, path, depth + 1)
                # len(sizes) counts the distinct nodes seen so far: a bound on the
                # nodes written, so the excess is what aliases added
                if total - len(sizes) > MAX_NODES:
                    raise _Refused(f"document expands by more than {MAX_NODES} nodes through "
                                   "aliases (alias bomb?)", child, path)
            active.discard(key)
        sizes[key] = total
        return total

    size(root, "$", 0)


class _Unusual(Exception):
    """The document needs the composing path (anything to refuse or report, or a
    feature plain plan data does not use: anchors, aliases, explicit tags, non-string
    keys, duplicate keys, deep nesting, several documents)."""


# Plain data nests far less than this; deeper documents take the composing path,
# which words the depth diagnostics.
_PLAIN_DEPTH = 64
_STR, _INT, _FLOAT, _BOOL = (_CORE + t for t in ("str", "int", "float", "bool"))
_TEXT_TAGS = (_STR, _CORE + "timestamp")


class _Open:
    """A sequence or mapping whose end event has not come yet."""

    __slots__ = ("node", "start", "key", "key_span")

    def __init__(self, node: LocatedNode, start: int):
        self.node = node
        self.start = start
        self.key: str | None = None   # a mapping's key waiting for its value
        self.key_span = None


def _read_plain(text: str) -> LocatedNode | None:
    """The located tree built straight from parser events (no YAML node graph), or
    ``None`` when the document is not plain data (see :class:`_Unusual`)."""
    if _FastLoader is None or yaml.reader.Reader.NON_PRINTABLE.search(text):
        return None
    loader = _FastLoader(text)
    try:
        return _Events(loader, LineIndex(text), may_hold_surrogates(text)).document()
    except Exception:  # noqa: BLE001 - anything at all: the composing path decides what it is
        return None
    finally:
        loader.dispose()


class _Events:
    def __init__(self, loader, lines: LineIndex, pair: bool):
        self.loader = loader
        self.span = lines.span
        self.pair = pair
        self.keys: dict[str, str] = {}

    def scalar(self, ev) -> object:
        tag = ev.tag
        if tag is not None and tag != "!":
            raise _Unusual
        tag = self.loader.resolve(ScalarNode, ev.value, ev.implicit)
        if tag in _TEXT_TAGS:
            return _paired(ev.value) if self.pair else ev.value
        if tag == _CORE + "null":
            return None
        node = ScalarNode(tag, ev.value, ev.start_mark, ev.end_mark, ev.style)
        if tag == _INT:
            value = self.loader.construct_yaml_int(node)
            if not _int_fits(value):
                raise _Unusual  # the converter refuses it with its position
            return value
        if tag == _FLOAT:
            value = self.loader.construct_yaml_float(node)
            if not math.isfinite(value):
                raise _Unusual  # NaN, infinities: the converter refuses them with their position
            return value
        if tag == _BOOL:
            return self.loader.construct_yaml_bool(node)
        raise _Unusual

    def document(self) -> LocatedNode:
        get = self.loader.get_event
        if type(get()) is not yaml.StreamStartEvent or type(get()) is not yaml.DocumentStartEvent:
            raise _Unusual
        stack: list[_Open] = []
        root: LocatedNode | None = None
        while True:
            ev = get()
            kind = type(ev)
            if kind is yaml.DocumentEndEvent:
                break
            if kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                top = stack.pop()
                if top.key is not None:  # pragma: no cover - the parser pairs keys
                    raise _Unusual
                top.node.span = self.span(top.start, ev.end_mark.index)
                done = top.node
            else:
                if ev.anchor is not None or kind is yaml.AliasEvent:
                    raise _Unusual
                parent = stack[-1] if stack else None
                if parent is None:
                    path = "$"
                elif parent.node.kind == ARRAY:
                    path = f"{parent.node.path}[{len(parent.node.value)}]"
                elif parent.key is None:  # a mapping key: plain strings only
                    if kind is not yaml.ScalarEvent:
                        raise _Unusual
                    key = self.scalar(ev)
                    if type(key) is not str or key in parent.node.key_spans:
                        raise _Unusual
                    parent.key = key
                    parent.key_span = self.span(ev.start_mark.index, ev.end_mark.index)
                    continue
                else:
                    path = child_path(parent.node.path, parent.key)
                if kind is yaml.ScalarEvent:
                    done = LocatedNode(SCALAR, self.scalar(ev),
                                       self.span(ev.start_mark.index, ev.end_mark.index), path,
                                       quoted=ev.style in ("'", '"'))
                elif kind is yaml.SequenceStartEvent and len(stack) <= 1 and (ev.tag is None or ev.tag == "!"):
                    done = self.long_sequence(ev, path, len(stack))  # a plan's calls: kept compact
                else:
                    if ev.tag is not None and ev.tag != "!" or len(stack) >= _PLAIN_DEPTH:
                        raise _Unusual
                    if kind is yaml.SequenceStartEvent:
                        node = LocatedNode(ARRAY, [], None, path)  # type: ignore[arg-type]
                    elif kind is yaml.MappingStartEvent:
                        node = LocatedNode(OBJECT, [], None, path, {})  # type: ignore[arg-type]
                    else:
                        raise _Unusual
                    stack.append(_Open(node, ev.start_mark.index))
                    continue
            if not stack:
                root = done
            else:
                parent = stack[-1]
                if parent.node.kind == ARRAY:
                    parent.node.value.append(done)
                else:
                    parent.node.value.append((parent.key, done))
                    parent.node.key_spans[parent.key] = parent.key_span
                    parent.key = parent.key_span = None
        if root is None or type(get()) is not yaml.StreamEndEvent:
            raise _Unusual
        return root

    def long_sequence(self, start, path: str, depth: int) -> LocatedNode:
        """The list of a plan's calls (the document, or a top-level key's value): its items
        kept as plain data and their offsets (:class:`_Items`), located when read."""
        marks = array("i")      # offsets of every node and key, in document order (see compact)
        firsts = array("i")     # where each item's offsets start in marks
        data: list = []
        get = self.loader.get_event
        while True:
            ev = get()
            if type(ev) is yaml.SequenceEndEvent:
                break
            firsts.append(len(marks))
            data.append(self.compact(ev, marks, depth + 1))
        return LocatedNode(ARRAY, _Items(self.span, data, marks, firsts, path),
                           self.span(start.start_mark.index, ev.end_mark.index), path)

    def compact(self, ev, marks: array, depth: int) -> object:
        """One node as plain data (a dict, a list, a scalar), its start and end offsets
        appended to ``marks`` (the end complemented, ``~end``, for a quoted scalar), then
        for a mapping each key's start and end before its value's, for a sequence its items'."""
        kind = type(ev)
        if ev.anchor is not None or kind is yaml.AliasEvent:
            raise _Unusual
        if kind is yaml.ScalarEvent:
            end = ev.end_mark.index
            marks.append(ev.start_mark.index)
            marks.append(~end if ev.style in ("'", '"') else end)
            return self.scalar(ev)
        if ev.tag is not None and ev.tag != "!" or depth >= _PLAIN_DEPTH:
            raise _Unusual
        at = len(marks)
        marks.append(ev.start_mark.index)
        marks.append(0)  # the end, once it comes
        get = self.loader.get_event
        if kind is yaml.SequenceStartEvent:
            items = []
            while True:
                child = get()
                if type(child) is yaml.SequenceEndEvent:
                    break
                items.append(self.compact(child, marks, depth + 1))
            marks[at + 1] = child.end_mark.index
            return items
        if kind is not yaml.MappingStartEvent:
            raise _Unusual
        entries: dict = {}
        keys = self.keys
        while True:
            kev = get()
            if type(kev) is yaml.MappingEndEvent:
                break
            if type(kev) is not yaml.ScalarEvent or kev.anchor is not None:
                raise _Unusual
            key = self.scalar(kev)
            if type(key) is not str or key in entries:
                raise _Unusual
            key = keys.setdefault(key, key)  # one string per key name, not one per call
            marks.append(kev.start_mark.index)
            marks.append(kev.end_mark.index)
            entries[key] = self.compact(get(), marks, depth + 1)
        marks[at + 1] = kev.end_mark.index
        return entries


class _Items(Sequence):
    """The items of a plan's list of calls, kept as plain data and offsets (a dict, the
    key strings shared, and a few ints packed in an array per call, where located nodes
    cost about 3 KB per call: issue 30 item 12) and located each time they are read: the
    located tree of a whole plan never exists at once.  The nodes read are the ones
    :class:`_Events` builds for anything else, spans and JSON paths alike."""

    __slots__ = ("_span", "_data", "_marks", "_firsts", "_path")

    def __init__(self, span, data: list, marks: array, firsts: array, path: str):
        self._span = span
        self._data = data
        self._marks = marks
        self._firsts = firsts
        self._path = path

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[LocatedNode]:
        path = self._path
        for i, value in enumerate(self._data):
            yield self._located(value, self._firsts[i], f"{path}[{i}]")[0]

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += len(self._data)
        if not 0 <= index < len(self._data):
            raise IndexError(index)
        return self._located(self._data[index], self._firsts[index], f"{self._path}[{index}]")[0]

    def _located(self, value, k: int, path: str) -> tuple[LocatedNode, int]:
        marks, span = self._marks, self._span
        start, end = marks[k], marks[k + 1]
        k += 2
        if isinstance(value, dict):
            entries = []
            key_spans = {}
            for key, item in value.items():
                key_spans[key] = span(marks[k], marks[k + 1])
                child, k = self._located(item, k + 2, child_path(path, key))
                entries.append((key, child))
            return LocatedNode(OBJECT, entries, span(start, end), path, key_spans), k
        if isinstance(value, list):
            items = []
            for j, item in enumerate(value):
                child, k = self._located(item, k, f"{path}[{j}]")
                items.append(child)
            return LocatedNode(ARRAY, items, span(start, end), path), k
        if end < 0:
            return LocatedNode(SCALAR, value, span(start, ~end), path, quoted=True), k
        return LocatedNode(SCALAR, value, span(start, end), path), k


def _mark_span(lines: LineIndex, mark) -> object:
    if mark is None:
        return lines.point(0)
    return lines.point(getattr(mark, "index", 0) or 0)


def parse_yaml(text: str, file: str | None = None) -> tuple[LocatedNode | None, list[Diagnostic]]:
    """Parse one safe YAML document into a :class:`LocatedNode` tree. Never raises."""
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8")
        except Exception:  # noqa: BLE001 - not bytes, not UTF-8: E003
            return None, [Diagnostic("E003", "input is not UTF-8 text", None, file)]
    too_large = size_problem(text, file)
    if too_large is not None:
        return None, [too_large]
    node = _read_plain(text)
    if node is not None:
        return node, lone_surrogates(text, node, file)
    lines = LineIndex(text)
    try:
        loader, root = _compose(text)
    except _TooDeep as exc:
        return None, [Diagnostic("E004", f"nesting deeper than {MAX_DEPTH} levels",
                                 _mark_span(lines, exc.mark), file)]
    except yaml.reader.ReaderError as exc:
        if LONE_SURROGATE.match(text, exc.position):  # text from a program: a UTF-8 file cannot hold one
            return None, [Diagnostic("E006", lone_surrogate_message(text[exc.position]),
                                     lines.point(exc.position), file)]
        return None, [Diagnostic("E003", f"invalid character: {exc.reason}",
                                 lines.point(exc.position), file)]
    except yaml.MarkedYAMLError as exc:
        parts = [p for p in (exc.context, exc.problem) if p]
        msg = "; ".join(parts) or "invalid YAML"
        mark = exc.problem_mark or exc.context_mark
        return None, [Diagnostic("E003", msg, _mark_span(lines, mark), file)]
    except RecursionError:
        return None, [Diagnostic("E004", "document nested too deeply", lines.point(0), file)]
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        return None, [Diagnostic("E003", f"invalid YAML: {exc}", lines.point(0), file)]
    if root is None:
        return None, [Diagnostic("E003", "empty document: expected a YAML value", lines.point(0), file)]
    conv = _Converter(text, file, loader)
    try:
        _check_expansion(root)
        node = conv.convert(root)
    except _Refused as exc:
        return None, conv.diags + [Diagnostic("E004", exc.message, conv.span(exc.node), file, exc.path)]
    return node, conv.diags + lone_surrogates(text, node, file)
