"""HTTP tools: ``http.request`` and ``http.get`` over an httpx AsyncClient.

Every hop (the first URL and each redirect, which are followed by hand) passes the
SSRF guard of :mod:`stdlib_tools.netguard` after DNS resolution; the connection
itself is also pinned to the checked addresses, so a DNS answer that changes
between the check and the connect (rebinding) cannot reach a private address.
Responses are read as a stream and cut at ``http_max_response_bytes``.
"""

from __future__ import annotations

import asyncio
import json as _json
import re
import sys
from typing import TYPE_CHECKING, Annotated, Any, Literal

from typing_extensions import TypedDict

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from . import netguard
from ._common import Field, make_tool
from .config import StdlibConfig, uses_config
from .errors import ToolError

if TYPE_CHECKING:  # httpx (and the CLI, rich and pygments it pulls in) is imported by the first request
    import httpx

__all__ = ["BoundedDecoder", "HttpResponse", "build", "GuardedBackend", "is_credential_header"]

REDIRECT_STATUSES = (301, 302, 303, 307, 308)
Method = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class HttpResponse(TypedDict):
    status: int
    url: str
    headers: dict[str, str]
    content_type: str | None
    text: str
    json: Any
    truncated: bool
    bytes: int
    redirects: list[str]


class GuardedBackend:
    """An httpcore network backend that checks (and pins) every address it connects to."""

    def __init__(self, inner: Any, allow: netguard.AllowList):
        self._inner = inner
        self._allow = allow

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> Any:
        addrs = await netguard.check_host_async(host, self._allow, port)
        last: Exception | None = None
        for addr in addrs:
            try:
                return await self._inner.connect_tcp(addr, port, timeout=timeout,
                                                     local_address=local_address,
                                                     socket_options=socket_options)
            except Exception as exc:  # noqa: BLE001 - try the next address
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        raise ToolError("Http.Blocked", "unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _make_transport(config: StdlibConfig, allow: netguard.AllowList) -> httpx.AsyncBaseTransport:
    import httpx

    if config.http_transport is not None:
        return config.http_transport
    transport = httpx.AsyncHTTPTransport(trust_env=False, retries=0)
    pool = getattr(transport, "_pool", None)
    inner = getattr(pool, "_network_backend", None)
    if inner is not None:
        pool._network_backend = GuardedBackend(inner, allow)  # type: ignore[union-attr]
    return transport


# Headers that carry credentials: dropped when a redirect changes the origin (scheme, host
# or port), as browsers do for Authorization; API keys and tokens by their usual names too.
_CREDENTIAL_NAMES = re.compile(r"auth|token|api[-_]?key|secret|cookie|session|passw|credential|signature",
                               re.IGNORECASE)


def is_credential_header(name: str) -> bool:
    return _CREDENTIAL_NAMES.search(name) is not None


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    scheme = url.scheme.lower()
    return scheme, (url.host or "").lower(), url.port or {"http": 80, "https": 443}.get(scheme)


MAX_ENCODINGS = 3       # stacked Content-Encodings accepted ("gzip, gzip" is two)
_STEP = 64 * 1024       # at most this many bytes come out of one decompression step


class _Inflater:
    """One gzip / deflate layer that never produces more than asked for per step."""

    def __init__(self, encoding: str) -> None:
        import zlib

        self.zlib = zlib
        self.raw_fallback = encoding == "deflate"  # "deflate" is zlib-wrapped, or raw in practice
        self.obj = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding != "deflate" else zlib.MAX_WBITS)
        self.tail = b""

    def step(self, data: bytes) -> bytes:
        """Up to ``_STEP`` bytes of output from pending input plus ``data``."""
        try:
            out = self.obj.decompress(self.tail + data, _STEP)
        except self.zlib.error as exc:
            if not self.raw_fallback:
                raise ToolError("Http.DecodingError", f"cannot decode the response body: {exc}") from None
            self.raw_fallback = False
            self.obj = self.zlib.decompressobj(-self.zlib.MAX_WBITS)
            return self.step(data)
        self.raw_fallback = False
        self.tail = self.obj.unconsumed_tail
        return out


class BoundedDecoder:
    """Undoes a response's Content-Encoding layers on raw chunks, stopping as soon as
    ``cap`` decoded bytes exist: a few kilobytes of nested gzip never expand in memory
    (httpx's own decoders inflate a whole chunk at once, whatever its ratio)."""

    def __init__(self, content_encoding: str | None, cap: int) -> None:
        names = [n.strip().lower() for n in (content_encoding or "").split(",") if n.strip()]
        names = [n for n in names if n != "identity"]
        if len(names) > MAX_ENCODINGS:
            raise ToolError("Http.DecodingError", f"{len(names)} stacked content encodings "
                            f"(at most {MAX_ENCODINGS})")
        unknown = [n for n in names if n not in ("gzip", "x-gzip", "deflate")]
        if unknown:
            raise ToolError("Http.DecodingError", f"unsupported content encoding {unknown[0]!r}")
        self.layers = [_Inflater(n) for n in reversed(names)]  # the last applied is undone first
        self.cap = cap
        self.out: list[bytes] = []
        self.size = 0
        self.full = False

    def feed(self, chunk: bytes) -> None:
        self._push(0, chunk)

    def _push(self, i: int, data: bytes) -> None:
        if self.full:
            return
        if i == len(self.layers):
            keep = data[: self.cap - self.size]
            self.out.append(keep)
            self.size += len(keep)
            self.full = len(keep) < len(data)
            return
        layer = self.layers[i]
        while not self.full:
            piece = layer.step(data)
            data = b""
            if piece:
                self._push(i + 1, piece)
            elif not layer.tail:
                return

    def result(self) -> tuple[bytes, bool]:
        return b"".join(self.out), self.full


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    """The decoded body, at most ``cap`` bytes, and whether it was cut; the raw (encoded)
    bytes read are capped too, so a body that decodes to nothing cannot stream forever."""
    if response.is_stream_consumed:  # an in-memory response (a mock transport): already whole
        data = response.content
        return data[:cap], len(data) > cap
    decoder = BoundedDecoder(response.headers.get("content-encoding"), cap)
    raw = 0
    async for chunk in response.aiter_raw():
        raw += len(chunk)
        decoder.feed(chunk)
        if decoder.full:
            break
        if raw > cap and decoder.layers:
            decoder.full = True
            break
    return decoder.result()


@uses_config("http_allow_list", "http_timeout", "http_max_response_bytes", "http_max_redirects", "http_user_agent",
             "http_transport")
def build(config: StdlibConfig) -> list[ToolSpec]:
    allow = netguard.AllowList(config.http_allow_list)

    async def request(method: str, url: str, headers: dict[str, str] | None = None,
                      params: dict[str, Any] | None = None, json: Any = None,
                      body: str | None = None, timeout: float | None = None,
                      follow_redirects: bool = True) -> HttpResponse:
        import httpx

        method = str(method).upper()
        if method not in Method.__args__:  # type: ignore[attr-defined]
            raise ToolError("Http.InvalidMethod", f"method {method!r} is not supported")
        if json is not None and body is not None:
            raise ToolError("Http.InvalidRequest", "give either json or body, not both")
        tmo = config.http_timeout if timeout is None else min(float(timeout), config.http_timeout)
        hdrs = {str(k): str(v) for k, v in (headers or {}).items()}
        hdrs.setdefault("User-Agent", config.http_user_agent)
        # a traced run's request joins its trace (W3C traceparent of the call's span); looked
        # up by name, as the standard library does not depend on the core's optional parts
        telemetry = sys.modules.get("sophon_dsl.telemetry")
        if telemetry is not None:
            telemetry.inject(hdrs)
        if not any(k.lower() == "accept-encoding" for k in hdrs):
            hdrs["Accept-Encoding"] = "gzip, deflate"  # what BoundedDecoder undoes
        content: bytes | None = None
        if json is not None:
            content = _json.dumps(json).encode()
            if not any(k.lower() == "content-type" for k in hdrs):
                hdrs["Content-Type"] = "application/json"
        elif body is not None:
            content = str(body).encode()
        query = {str(k): v if isinstance(v, (str, int, float)) else _json.dumps(v)
                 for k, v in (params or {}).items()}

        redirects: list[str] = []
        await netguard.check_url_async(str(url), allow)  # the URL as written, before httpx parses it
        try:
            current = httpx.URL(str(url))
            if query:
                current = current.copy_merge_params(query)
        except Exception as exc:  # noqa: BLE001 - httpx raises several types for a bad URL: one named error
            raise ToolError("Http.InvalidUrl", f"invalid URL {url!r}: {exc}") from None
        transport = _make_transport(config, allow)
        try:  # one deadline for the whole exchange: httpx's timeout is per read, and a
            # server sending a byte a second never trips it
            async with asyncio.timeout(tmo):
                async with httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False,
                                             timeout=httpx.Timeout(tmo)) as client:
                    while True:
                        # every hop, as httpx parsed it (the first one was also checked as written)
                        await netguard.check_url_async(str(current), allow)
                        try:
                            req = client.build_request(method, current, headers=hdrs, content=content)
                            response = await client.send(req, stream=True)
                        except ToolError:
                            raise
                        except httpx.TimeoutException as exc:
                            raise ToolError("Http.Timeout", f"{method} {current} timed out after {tmo}s") from exc
                        except httpx.InvalidURL as exc:
                            # httpx builds the next request of a redirect inside send (even when
                            # it does not follow it) and lets a bad Location out as InvalidURL,
                            # not an HTTPError; the request's own URL was parsed above
                            raise ToolError("Http.InvalidRedirect", f"{method} {current} redirected to an "
                                                                    f"invalid URL: {exc}") from None
                        except httpx.RemoteProtocolError as exc:
                            code = ("Http.InvalidRedirect" if str(exc).startswith("Invalid URL in location")
                                    else "Http.ConnectionError")
                            raise ToolError(code, f"{method} {current} failed: {exc}") from exc
                        except httpx.HTTPError as exc:
                            raise ToolError("Http.ConnectionError", f"{method} {current} failed: {exc}") from exc
                        try:
                            location = response.headers.get("location")
                            if follow_redirects and response.status_code in REDIRECT_STATUSES and location:
                                if len(redirects) >= config.http_max_redirects:
                                    raise ToolError("Http.TooManyRedirects",
                                                    f"more than {config.http_max_redirects} redirects")
                                try:
                                    nxt = current.join(location)
                                except Exception as exc:  # noqa: BLE001 - as for the URL: one named error
                                    raise ToolError("Http.InvalidRedirect",
                                                    f"bad redirect {location!r}: {exc}") from None
                                if response.status_code == 303 or (
                                        response.status_code in (301, 302) and method == "POST"):
                                    if method != "HEAD":
                                        method = "GET"
                                    content = None
                                    hdrs = {k: v for k, v in hdrs.items() if k.lower() != "content-type"}
                                if _origin(nxt) != _origin(current):
                                    hdrs = {k: v for k, v in hdrs.items() if not is_credential_header(k)}
                                redirects.append(str(nxt))
                                current = nxt
                                continue
                            try:
                                raw, truncated = await _read_capped(response, config.http_max_response_bytes)
                            except httpx.TimeoutException as exc:
                                raise ToolError("Http.Timeout", f"{method} {current} timed out after {tmo}s") from exc
                            except httpx.HTTPError as exc:
                                raise ToolError("Http.ConnectionError", f"reading {current} failed: {exc}") from exc
                        finally:
                            await response.aclose()
                        break
        except TimeoutError:
            raise ToolError("Http.Timeout", f"{method} {current} took longer than {tmo}s in all") from None

        encoding = response.charset_encoding or "utf-8"
        try:
            text = raw.decode(encoding, errors="replace")
        except LookupError:
            text = raw.decode("utf-8", errors="replace")
        ctype = response.headers.get("content-type")
        parsed: Any = None
        if not truncated and ctype and "json" in ctype.lower():
            try:
                parsed = _json.loads(text)
            except ValueError:
                parsed = None
        return HttpResponse(status=response.status_code, url=str(current),
                            headers={k: v for k, v in response.headers.items()},
                            content_type=ctype, text=text, json=parsed, truncated=truncated,
                            bytes=len(raw), redirects=redirects)

    async def get(url: str, headers: dict[str, str] | None = None,
                  params: dict[str, Any] | None = None, timeout: float | None = None) -> HttpResponse:
        return await request("GET", url, headers=headers, params=params, timeout=timeout)

    # precise input annotations for the schema (the functions take plain values)
    request.__annotations__.update({
        "method": Annotated[Method, Field(description="HTTP method")],
        "url": Annotated[str, Field(description="absolute http(s) URL")],
        "json": Annotated[Any, Field(description="JSON request body (sets Content-Type)")],
        "body": Annotated[str | None, Field(description="raw text request body")],
        "timeout": Annotated[float | None, Field(gt=0, description="seconds; capped by configuration")],
    })
    get.__annotations__.update({
        "url": Annotated[str, Field(description="absolute http(s) URL")],
        "timeout": Annotated[float | None, Field(gt=0, description="seconds; capped by configuration")],
    })
    return [
        make_tool(request, "http.request", Risk.MEDIUM,
                  "Send an HTTP request (any method) to a public http(s) URL and return the status, "
                  "headers and body (text, plus parsed JSON when the response is JSON). Private and "
                  "metadata addresses are refused, redirects are checked hop by hop, the body is cut "
                  f"at {config.http_max_response_bytes} bytes."),
        make_tool(get, "http.get", Risk.LOW,
                  "Fetch a public http(s) URL with GET and return the status, headers and body "
                  "(text, plus parsed JSON when the response is JSON). Private and metadata addresses "
                  "are refused, redirects are checked hop by hop."),
    ]
