"""A local, scripted LLM server for tests: OpenAI Chat Completions and Anthropic Messages, both
streamed as server-sent events, on 127.0.0.1 with an ephemeral port. Nothing leaves the machine.

Usage (tests in tests/llm import it as ``from sse_server import ...``; elsewhere put tests/llm on
``sys.path`` first)::

    with ScriptedLLMServer(replies=["Hello, world"], chunk_chars=4) as srv:
        client = AsyncOpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        ...                                   # or AsyncAnthropic(base_url=srv.anthropic_base_url)
        srv.replies.append("another reply")    # the script may grow while the server runs
        assert srv.requests[0].json["model"] == "gpt-test"

Each POST to ``/v1/chat/completions`` or ``/v1/messages`` takes the next entry of ``replies``
(one shared script for both APIs). An entry is

* a string -- the reply text, streamed in chunks of ``chunk_chars`` characters with ``delay``
  seconds before each chunk (``stream: false`` requests get the whole reply as one JSON body);
* :class:`ServerError` (or a dict ``{"status": 429, "message": ...}``) -- an HTTP error response in
  the API's error shape (429 -> ``rate_limit_error``, 529 -> ``overloaded_error``, 500 ->
  ``api_error``, 400 -> ``invalid_request_error``, ...);
* :class:`Reply` -- a reply with its own ``chunk_chars``/``delay``, and optionally
  ``fail_after`` chunks: then a mid-stream error event (``fail_with``, default 529 overloaded) is
  sent, or with ``drop=True`` the connection is simply closed.

``errors={request_index: status_or_ServerError}`` answers chosen requests (0-based, counting all
completion requests) with an error without using up a reply. When the script is exhausted the
server answers 400 ``"ScriptedLLMServer: no scripted reply left"`` (or cycles with
``cycle=True``). Every completion request is recorded in ``requests`` as a :class:`Recorded`
(``path``, ``api``, ``headers``, ``json``, ``status``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ScriptedLLMServer", "ServerError", "Reply", "Recorded"]

_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_api_key", 404: "not_found",
                 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error",
                 529: "server_error"}
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                    429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


@dataclass
class ServerError:
    """Answer a request with an HTTP error status (and the API's JSON error body)."""
    status: int
    message: str | None = None
    retry_after: float | None = None


@dataclass
class Reply:
    """A reply with its own streaming settings, optionally failing mid-stream."""
    text: str
    chunk_chars: int | None = None
    delay: float | None = None
    fail_after: int | None = None          # chunks sent before the failure
    fail_with: ServerError = field(default_factory=lambda: ServerError(529, "Overloaded"))
    drop: bool = False                      # just close the connection instead of an error event


@dataclass
class Recorded:
    """One request the server received."""
    method: str
    path: str
    api: str                   # "openai" | "anthropic" | "other"
    headers: dict[str, str]
    json: Any
    status: int = 200          # what the server answered


def _as_entry(entry: Any) -> Any:
    if isinstance(entry, dict) and "status" in entry:
        return ServerError(int(entry["status"]), entry.get("message"), entry.get("retry_after"))
    if isinstance(entry, int):
        return ServerError(entry)
    if isinstance(entry, dict) and "text" in entry:
        return Reply(**entry)
    return entry


class ScriptedLLMServer:
    """See the module docstring. Use as a context manager (or call ``start()`` / ``stop()``)."""

    def __init__(self, replies: list[Any] | None = None, *, chunk_chars: int = 8,
                 delay: float = 0.0, errors: dict[int, Any] | None = None, cycle: bool = False,
                 model: str = "scripted-model"):
        self.replies: list[Any] = list(replies or [])
        self.chunk_chars = max(1, chunk_chars)
        self.delay = delay
        self.errors: dict[int, Any] = dict(errors or {})
        self.cycle = cycle
        self.model = model
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._next_reply = 0
        self._count = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> "ScriptedLLMServer":
        server = self

        class Handler(_Handler):
            owner = server

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="ScriptedLLMServer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---------------------------------------------------------------- addresses
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """For ``AsyncOpenAI(base_url=...)`` / ``OPENAI_BASE_URL`` (ends in ``/v1``)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For ``AsyncAnthropic(base_url=...)`` / ``ANTHROPIC_BASE_URL``."""
        return self.url

    # ---------------------------------------------------------------- script
    def add_reply(self, entry: Any) -> None:
        with self._lock:
            self.replies.append(entry)

    def _take(self) -> tuple[int, Any]:
        with self._lock:
            index = self._count
            self._count += 1
            if index in self.errors:
                return index, _as_entry(self.errors[index])
            if self._next_reply >= len(self.replies):
                if self.cycle and self.replies:
                    self._next_reply = 0
                else:
                    return index, ServerError(400, "ScriptedLLMServer: no scripted reply left")
            entry = self.replies[self._next_reply]
            self._next_reply += 1
            return index, _as_entry(entry)


class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedLLMServer
    protocol_version = "HTTP/1.0"   # close-delimited bodies: simplest correct streaming
    server_version = "ScriptedLLMServer/1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # ---------------------------------------------------------------- plumbing
    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

    def _event(self, data: Any, event: str | None = None) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        text = (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"
        self.wfile.write(text.encode())
        self.wfile.flush()

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": self.owner.model, "object": "model", "created": 0, "owned_by": "test"}]})
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        path = self.path.split("?", 1)[0].rstrip("/")
        api = ("openai" if path.endswith("/chat/completions")
               else "anthropic" if path.endswith("/messages") else "other")
        rec = Recorded("POST", self.path, api, {k.lower(): v for k, v in self.headers.items()}, body)
        self.owner.requests.append(rec)
        if api == "other":
            rec.status = 404
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        _, entry = self.owner._take()
        if isinstance(entry, ServerError):
            rec.status = entry.status
            self._error(api, entry)
            return
        reply = entry if isinstance(entry, Reply) else Reply(str(entry))
        stream = bool(isinstance(body, dict) and body.get("stream"))
        try:
            if not stream:
                self._whole(api, reply, body)
            elif api == "openai":
                self._openai_stream(reply, body)
            else:
                self._anthropic_stream(reply, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away mid-stream

    # ---------------------------------------------------------------- errors
    def _error(self, api: str, err: ServerError) -> None:
        headers = {"retry-after": str(err.retry_after)} if err.retry_after is not None else {}
        message = err.message or f"scripted error {err.status}"
        if api == "anthropic":
            etype = _ANTHROPIC_TYPES.get(err.status, "api_error")
            body = {"type": "error", "error": {"type": etype, "message": message}}
        else:
            etype = _OPENAI_TYPES.get(err.status, "server_error")
            body = {"error": {"message": message, "type": etype, "param": None, "code": etype}}
        self._send_json(err.status, body, headers)

    # ---------------------------------------------------------------- replies
    def _chunks(self, reply: Reply) -> list[str]:
        size = max(1, reply.chunk_chars or self.owner.chunk_chars)
        return [reply.text[i:i + size] for i in range(0, len(reply.text), size)]

    def _pause(self, reply: Reply) -> None:
        delay = self.owner.delay if reply.delay is None else reply.delay
        if delay:
            time.sleep(delay)

    def _model(self, body: Any) -> str:
        model = body.get("model") if isinstance(body, dict) else None
        return model if isinstance(model, str) and model else self.owner.model

    def _whole(self, api: str, reply: Reply, body: Any) -> None:
        model = self._model(body)
        if api == "openai":
            self._send_json(200, {
                "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": reply.text,
                                         "refusal": None}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": len(self._chunks(reply)),
                          "total_tokens": 1 + len(self._chunks(reply))}})
        else:
            self._send_json(200, {
                "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": reply.text}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": len(self._chunks(reply))}})

    def _openai_stream(self, reply: Reply, body: Any) -> None:
        model, created = self._model(body), int(time.time())

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                    "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                 "finish_reason": finish}]}

        self._start_sse()
        self._event(chunk({"role": "assistant", "content": ""}))
        for n, piece in enumerate(self._chunks(reply)):
            if reply.fail_after is not None and n >= reply.fail_after:
                if not reply.drop:
                    err = reply.fail_with
                    etype = _OPENAI_TYPES.get(err.status, "server_error")
                    self._event({"error": {"message": err.message or "stream failed",
                                           "type": etype, "code": etype, "param": None}})
                return
            self._pause(reply)
            self._event(chunk({"content": piece}))
        self._event(chunk({}, "stop"))
        self._event("[DONE]")

    def _anthropic_stream(self, reply: Reply, body: Any) -> None:
        model = self._model(body)
        pieces = self._chunks(reply)
        self._start_sse()
        self._event({"type": "message_start", "message": {
            "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}}, "message_start")
        self._event({"type": "content_block_start", "index": 0,
                     "content_block": {"type": "text", "text": ""}}, "content_block_start")
        self._event({"type": "ping"}, "ping")
        for n, piece in enumerate(pieces):
            if reply.fail_after is not None and n >= reply.fail_after:
                if not reply.drop:
                    err = reply.fail_with
                    self._event({"type": "error", "error": {
                        "type": _ANTHROPIC_TYPES.get(err.status, "api_error"),
                        "message": err.message or "stream failed"}}, "error")
                return
            self._pause(reply)
            self._event({"type": "content_block_delta", "index": 0,
                         "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
        self._event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self._event({"type": "message_delta",
                     "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                     "usage": {"output_tokens": len(pieces)}}, "message_delta")
        self._event({"type": "message_stop"}, "message_stop")
