"""Replies from a script: :class:`ScriptedProvider`, for tests, demos and offline use.

Spec: ``scripted:FILE`` (YAML or JSON).  It can simulate streaming speed and failures.

Two ways to pick a reply:

* in order: each request takes the next turn of the script (the original mode);
* keyed: each request takes the reply of the first :class:`KeyedReply` whose pattern is found in
  the request's text, so requests sent in parallel (a classifier next to a latent call next to
  the agent's own turn) get their replies whatever order they arrive in.  A request no key
  matches falls back to the ordered turns, or fails when there are none.

::

    ScriptedProvider(keyed=[KeyedReply(r"COMPLEX or SIMPLE", "SIMPLE"),
                            KeyedReply(r"Request: ", ["$state.x = f()", "return 1"])])

    # the same as a file:  {"keyed": [{"match": "COMPLEX or SIMPLE", "reply": "SIMPLE"},
    #                                  {"match": "Request: ", "replies": ["...", "..."]}]}
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

from ..capabilities import declared
from ..provider import Message, ProviderError
from .errors import is_retryable_status

__all__ = ["KeyedReply", "ScriptedProvider", "Sleep", "from_spec", "request_text"]

Sleep = Callable[[float], Awaitable[Any]]


def _read_source(source: Any) -> Any:
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ProviderError(f"scripted: cannot read {path}: not UTF-8 text ({exc.reason} at byte "
                                f"{exc.start})", provider="scripted") from exc
        except OSError as exc:
            raise ProviderError(f"scripted: cannot read {path}: {exc}", provider="scripted") from exc
        if path.suffix.lower() == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ProviderError(f"scripted: {path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}",
                                    provider="scripted") from exc
            except RecursionError as exc:
                raise ProviderError(f"scripted: {path}: nested too deeply", provider="scripted") from exc
        else:
            import yaml

            try:
                data = yaml.safe_load(text)  # YAML is a superset of JSON
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
                problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
                raise ProviderError(f"scripted: {where}: not valid YAML: {problem}",
                                    provider="scripted") from exc
            except RecursionError as exc:
                raise ProviderError(f"scripted: {path}: nested too deeply", provider="scripted") from exc
    else:
        data = source
    return data


def _load_turns(data: Any) -> list[Any]:
    if isinstance(data, dict) and "turns" in data:
        data = data["turns"]
    if isinstance(data, (str, dict)):
        data = [data]
    if not isinstance(data, list) or not data:
        raise ProviderError("scripted: the script must be a non-empty list of turns",
                            provider="scripted")
    for i, turn in enumerate(data):
        if not isinstance(turn, (str, dict)):
            raise ProviderError(f"scripted: turn {i} must be a string or a mapping, "
                                f"not {type(turn).__name__}", provider="scripted")
        if isinstance(turn, dict) and "reply" not in turn and "error" not in turn:
            raise ProviderError(f"scripted: turn {i} has neither 'reply' nor 'error'",
                                provider="scripted")
    return data


def request_text(messages: Sequence[Message]) -> str:
    """What a key's pattern is searched in: every message as ``role: content``, one per line."""
    return "\n".join(f"{m.role}: {m.content}" for m in messages)


@dataclass
class KeyedReply:
    """A reply chosen by content: ``pattern`` (a regular expression, searched in
    :func:`request_text` of the request) picks it.  ``reply`` is one turn (a string or a turn
    mapping, as in the ordered script) or a list of turns taken one per matching request, the
    last one repeating; ``used`` counts the requests it answered."""

    pattern: str
    reply: Any
    used: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        try:
            self._regex = re.compile(self.pattern)
        except (re.error, TypeError) as exc:
            raise ProviderError(f"scripted: key {self.pattern!r} is not a regular expression: {exc}",
                                provider="scripted") from exc
        turns = self.reply if isinstance(self.reply, list) else [self.reply]
        _load_turns(turns)  # the same checks as ordered turns
        self._turns = turns

    def matches(self, text: str) -> bool:
        return self._regex.search(text) is not None

    def take(self) -> Any:
        turn = self._turns[min(self.used, len(self._turns) - 1)]
        self.used += 1
        return turn


def _load_keyed(data: Any) -> list[KeyedReply]:
    if not isinstance(data, list):
        raise ProviderError("scripted: 'keyed' must be a list of {match, reply | replies}",
                            provider="scripted")
    out = []
    for i, entry in enumerate(data):
        if isinstance(entry, KeyedReply):
            out.append(entry)
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("match"), str):
            raise ProviderError(f"scripted: keyed entry {i} needs a 'match' pattern", provider="scripted")
        # {match, reply, chunk_size...}: the entry less its key is one turn mapping
        reply = entry["replies"] if "replies" in entry else {k: v for k, v in entry.items() if k != "match"}
        out.append(KeyedReply(entry["match"], reply))
    return out


class ScriptedProvider:
    """Replies from a script: a YAML/JSON file (or a list given directly) of turns.

    Each call to :meth:`stream` takes the next turn, cycling back to the first after the last
    (``cycle=False`` raises a non-retryable error instead). A turn is either a string (the reply)
    or a mapping::

        - "plain reply, streamed in chunks"
        - reply: '{"calls": [], "output": 42}'
          chunk_size: 8            # characters per streamed delta (default: the provider's)
          tokens_per_second: 50    # one delta counts as one token; omitted = no delay
        - error: {status: 429, message: "rate limited"}      # fails before any text
        - reply: "partial te"                                 # streams this, then fails
          error: {status: 529, message: "overloaded", retryable: true}

    An error's ``retryable`` defaults to what its status implies (429, 529, 5xx).
    ``calls`` records every request (messages and options) for assertions.

    Keyed mode: ``keyed`` (a list of :class:`KeyedReply` or ``{match, reply | replies}``
    mappings, or a ``keyed:`` list in the script file) is tried first, in order; the first
    pattern found in the request picks the reply.  ``script`` may then be left out.

    ``capabilities`` (or a ``capabilities:`` list in the script file, or ``scripted:FILE[...]``)
    says what the model the script stands in for can do, for model hints; a script declares
    none by default, whatever ``--model`` says, since no model answers it.
    """

    def __init__(self, script: str | Path | Sequence[Any] | None = None, *, chunk_size: int = 16,
                 tokens_per_second: float | None = None, cycle: bool = True,
                 sleep: Sleep | None = None, name: str = "scripted", keyed: Sequence[Any] = (),
                 capabilities: Sequence[str] | None = None):
        self.name = name
        data = _read_source(script) if script is not None else None
        keys = list(keyed)
        if isinstance(data, dict) and "capabilities" in data and capabilities is None:
            listed = data["capabilities"]
            if not isinstance(listed, list) or not all(isinstance(c, str) for c in listed):
                raise ProviderError("scripted: 'capabilities' must be a list of names", provider="scripted")
            capabilities = listed
        if isinstance(data, dict) and "capabilities" in data:
            data = {k: v for k, v in data.items() if k != "capabilities"} or None
        if isinstance(data, dict) and "keyed" in data:
            keys += data["keyed"] if isinstance(data["keyed"], list) else [data["keyed"]]
            data = data.get("turns")
        self.capabilities: frozenset[str] | None = declared(capabilities)
        self.keyed = _load_keyed(keys)
        if data is None and not self.keyed:
            raise ProviderError("scripted: give turns, keyed replies or both", provider="scripted")
        self.turns = _load_turns(data) if data is not None else []
        self.source = str(script) if isinstance(script, (str, Path)) else None
        self.chunk_size = max(1, int(chunk_size))
        self.tokens_per_second = tokens_per_second
        self.cycle = cycle
        self._sleep = sleep or asyncio.sleep
        self._next = 0
        self.calls: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        keys = f", {len(self.keyed)} keys" if self.keyed else ""
        return f"ScriptedProvider({self.source or f'{len(self.turns)} turns'}{keys})"

    def capabilities_for(self, model: str | None) -> frozenset[str]:
        """The declared capabilities (none when nothing was declared)."""
        return frozenset(self.capabilities or ())

    def _take(self, messages: Sequence[Message]) -> Any:
        if self.keyed:
            text = request_text(messages)
            for key in self.keyed:
                if key.matches(text):
                    return key.take()
            if not self.turns:
                raise ProviderError("scripted: no keyed reply matches the request "
                                    f"(keys: {', '.join(repr(k.pattern) for k in self.keyed)})",
                                    provider=self.name, retryable=False)
        if self._next >= len(self.turns):
            if not self.cycle:
                raise ProviderError(f"scripted: all {len(self.turns)} turns used",
                                    provider=self.name, retryable=False)
            self._next = 0
        turn = self.turns[self._next]
        self._next += 1
        return turn

    async def stream(self, messages: Sequence[Message], *, model: str | None = None,
                     json_schema: dict | None = None, temperature: float | None = None,
                     max_tokens: int | None = None) -> AsyncIterator[str]:
        self.calls.append({"messages": list(messages), "model": model, "json_schema": json_schema,
                           "temperature": temperature, "max_tokens": max_tokens})
        turn = self._take(messages)
        if isinstance(turn, str):
            turn = {"reply": turn}
        reply = turn.get("reply")
        if reply is not None and not isinstance(reply, str):
            reply = json.dumps(reply)  # a structured reply given as YAML data
        reply = reply or ""
        size = max(1, int(turn.get("chunk_size") or self.chunk_size))
        tps = turn.get("tokens_per_second", self.tokens_per_second)
        delay = 1.0 / float(tps) if tps else 0.0
        for i in range(0, len(reply), size):
            if delay:
                await self._sleep(delay)
            yield reply[i:i + size]
        error = turn.get("error")
        if error is not None:
            if not isinstance(error, dict):
                error = {"message": str(error)}
            status = error.get("status")
            status = int(status) if status is not None else None
            retryable = error.get("retryable")
            if retryable is None:
                retryable = is_retryable_status(status)
            raise ProviderError(f"{self.name}: scripted error"
                                + (f" HTTP {status}" if status is not None else "")
                                + f": {error.get('message', 'scripted failure')}",
                                provider=self.name, status=status, retryable=bool(retryable))


def from_spec(arg: str, model: str | None) -> ScriptedProvider:
    """``scripted:FILE``; a script has no model to choose, so ``model`` is not used."""
    if not arg:
        raise ProviderError("scripted provider needs a file: 'scripted:FILE'", provider="scripted")
    return ScriptedProvider(arg)
