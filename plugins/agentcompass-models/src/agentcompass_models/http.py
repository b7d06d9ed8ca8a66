"""The HTTP machinery shared by the providers: pooled connections, retries, error classification, secrets.

* One pooled ``aiohttp.ClientSession`` per provider endpoint (base URL + settings) and event loop, shared by
  every role client of that endpoint, with at most ``--max-connections`` requests in flight (a semaphore in
  front of the pool, so that queued requests wait for a slot without their timeout ticking).

Why aiohttp rather than httpx or the official SDKs: see the plugin's README ("Why aiohttp"). In short, the
pool of httpx (httpcore 1.0) does work quadratic in the number of connections on every request — at 100
connections about 10 ms of CPU per request on the event loop — while aiohttp needs ~0.3 ms, is already a
dependency of the core (the gateway is served with it), and the SDKs bring their own retry and pooling
policies that would fight the runtime's.
* The slots adapt to the provider's rate limits (:mod:`agentcompass.runtime.rate_limits`: fewer calls in flight
  after a 429 or 503, one more a round after answers); a rate-limited call (429) is retried past
  ``--max-retries`` while ``--request-timeout`` from its first try allows.
* ``--request-timeout`` bounds each request as a whole (connect, send, wait, read).
* Retries with exponential backoff and full jitter on 429, 408, 409, 5xx, connection errors, timeouts and
  unreadable answers, honouring ``Retry-After`` / ``retry-after-ms``, at most ``--max-retries`` times.
* An answer that cannot be read — a body that is not JSON (an HTML page from a proxy), JSON of the wrong shape
  (not the protocol's answer), a broken event stream — is the provider's failure, like a 5xx: retried, and
  past the retries an outage (the task stays unfinished, resumable). Its message names the provider's base URL
  and quotes the start of what it answered, masked, on one line.
* 401 / 403 (credentials) and 404 (unknown model or wrong base URL) are *fatal*: every later call would fail
  the same way, so the run stops scheduling. Other 4xx end the task without retry.
* A refused connection (nothing listens at the base URL) is fatal at once while the endpoint has never
  answered in this process (a wrong URL or a server that is not up: every task would wait out the backoff to
  fail the same way); once the endpoint has answered, a refusal is taken for a restart and retried like any
  connection error, and is fatal only when the retries are exhausted.
* Every message this module builds is masked of the client's secrets (and their encodings) *before* any
  server text in it is shortened, so a key the server echoes is never cut into a fragment that escapes the
  mask. The secrets are also exposed as ``secrets`` so the runner masks them in everything it writes.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import json
import random
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from agentcompass.errors import UsageError, describe
from agentcompass.runtime.codecs import CODECS, ProtocolError
from agentcompass.runtime.model_providers import MASK, MIN_SECRET_LENGTH, ProviderSettings, Redactor
from agentcompass.runtime.models import ModelClient, ModelError
from agentcompass.runtime.rate_limits import RATE_LIMITED, AdaptiveLimit

#: Backoff: the n-th retry waits uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**n)) seconds.
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
#: A server's Retry-After is honoured up to this many seconds.
RETRY_AFTER_CAP = 120.0
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429})
FATAL_STATUSES = frozenset({401, 403, 404})
#: Server text quoted in an error message is cut to this many characters (after masking).
ERROR_SNIPPET = 300
#: An unreadable answer (an HTML page, a broken event) is quoted up to this many characters (after masking).
UNREADABLE_SNIPPET = 160
#: What each protocol's answer is called in a message saying an answer is not one.
ANSWER_NAMES = {"chat": "a chat completion", "anthropic": "an Anthropic message", "responses": "a Responses answer",
                "gemini": "a Gemini answer"}

#: Reads a parsed answer: what is wrong with its shape (a short phrase), or None when it can be read.
ShapeCheck = Callable[[Mapping[str, Any]], "str | None"]


class ProviderError(ModelError):
    """A failed call of an HTTP provider; ``attempts`` is how many requests were made for it."""

    attempts: int = 1


class EndpointUnreachable(ProviderError):
    """The connection to the endpoint was refused: nothing listens at its base URL."""


def answer_problem(protocol: str, data: Any) -> str | None:
    """What keeps ``data`` (parsed JSON) from being read as an answer in ``protocol``, or None."""
    try:
        CODECS[protocol].parse_response(data)
    except Exception as exc:  # the codec's own complaint, or whatever an odd shape made it trip on
        why = str(exc) if isinstance(exc, ProtocolError) else describe(exc)
        if why.startswith("malformed ") and ": " in why:  # "malformed chat completion: no choices": the cause
            why = why.split(": ", 1)[1]
        return f"JSON that is not {ANSWER_NAMES.get(protocol, 'an answer')} ({why})"
    return None


def split_base_url(url: str) -> tuple[str, list[str]]:
    """``url`` without credentials in it, and the credentials it carried (to be treated as secrets)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"model base URL {_safe_url(url)!r} must be an http:// or https:// URL")
    secrets = [s for s in (parts.password, parts.username) if s]
    return url.rstrip("/"), secrets


def _safe_url(url: str) -> str:
    """``url`` with any user:password part masked, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return urlunsplit((parts.scheme, f"{MASK}@{host}", parts.path, parts.query, parts.fragment))
    return url


class _Pool:
    def __init__(self, client: aiohttp.ClientSession, slots: int, provider: str = "") -> None:
        self.client = client
        #: At most ``--max-connections`` calls in flight, fewer while the provider rate-limits them.
        self.slots = AdaptiveLimit(provider, slots)
        self.refs = 0
        #: Whether the endpoint has sent any HTTP answer yet (a refusal before that is a wrong URL).
        self.answered = False


#: Shared pools by (endpoint, limits, event loop). A client takes a reference on first use and drops it in
#: ``aclose``; the last one out closes the pool.
_POOLS: dict[tuple[Any, ...], _Pool] = {}


_SSL_CONTEXT: ssl.SSLContext | None = None


def _ssl_context() -> ssl.SSLContext:
    """One verifying TLS context per process (loading CA certificates takes a noticeable time)."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = ssl.create_default_context()
    return _SSL_CONTEXT


def _pool_key(base_url: str, settings: ProviderSettings) -> tuple[Any, ...]:
    parts = urlsplit(base_url)
    return (parts.scheme, parts.netloc, settings.max_connections, settings.request_timeout,
            id(asyncio.get_running_loop()))


class HTTPModelClient(ModelClient):
    """Base of the HTTP providers: subclasses build the request and parse the reply."""

    provider: str = ""

    def __init__(self, model: str, base_url: str, settings: ProviderSettings, *, api_key: str | None,
                 key_source: str, params: Mapping[str, Any] | None = None,
                 extra_secrets: tuple[str, ...] = ()) -> None:
        self.model = model
        self.base_url, url_secrets = split_base_url(base_url)
        self.settings = settings
        self._api_key = api_key
        self.key_source = key_source
        self.params = dict(params or {})
        #: Real credentials, for the runner's redactor. Never logged, never written.
        self.secrets: tuple[str, ...] = tuple(s for s in (api_key, *url_secrets, *extra_secrets) if s)
        self._redactor = Redactor()
        self._redactor.add(*self.secrets)
        self._pool: _Pool | None = None
        self._pool_key: tuple[Any, ...] | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={_safe_url(self.base_url)!r})"

    # -- subclass API -------------------------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    def url(self) -> str:
        raise NotImplementedError

    async def authorize(self, url: Any, headers: dict[str, str], content: bytes) -> tuple[Any, dict[str, str]]:
        """The URL to request and the headers to send for one attempt of a POST of ``content`` to ``url``.

        Called before every attempt (a retry included), so a cloud provider can sign the exact bytes (SigV4) or
        put in a fresh access token; the URL may come back as a ``yarl.URL`` that must not be re-encoded. The
        plain providers' keys are in ``headers`` already."""
        return url, headers

    def streams(self, content_type: str) -> bool:
        """Whether a 200 answer of ``content_type`` is a stream to relay piece by piece (else read whole)."""
        return "text/event-stream" in content_type

    def relay(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """A streamed answer's bytes as the agent and the stream reader take them: server-sent events. A
        provider whose cloud streams another encoding (AWS event-stream) converts here."""
        return chunks

    def add_secret(self, secret: str) -> None:
        """Mask ``secret`` (an access token obtained after the client was made) in this client's messages."""
        if secret and secret not in self.secrets:
            self.secrets = (*self.secrets, secret)
            self._redactor.add(secret)

    # -- helpers ------------------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        """``text`` with this client's secrets masked (their encodings and cut-off pieces too). Call it on
        server text *before* shortening it."""
        text = self._redactor.text(text)
        for secret in self.secrets:
            if len(secret) < MIN_SECRET_LENGTH:  # too short for the redactor, still never shown
                text = text.replace(secret, MASK)
        return text

    @property
    def safe_base_url(self) -> str:
        return _safe_url(self.base_url)

    @property
    def origin(self) -> str:
        """Who answers, as messages name it: the provider, the model and the base URL (credentials masked)."""
        return self.scrub(f"{self.provider} model {self.model!r} at {self.safe_base_url}")

    def _acquire_pool(self) -> _Pool:
        if self._pool is not None:
            return self._pool
        if self._closed:
            raise ModelError(f"{self.provider} client for {self.model!r} is closed")
        key = _pool_key(self.base_url, self.settings)
        pool = _POOLS.get(key)
        if pool is None:
            n = self.settings.max_connections
            https = urlsplit(self.base_url).scheme == "https"
            connector = aiohttp.TCPConnector(limit=n, limit_per_host=0, ssl=_ssl_context() if https else False)
            client = aiohttp.ClientSession(connector=connector, trust_env=False,
                                           timeout=aiohttp.ClientTimeout(total=None))
            pool = _POOLS[key] = _Pool(client, n, self.scrub(f"{self.provider} at {self.safe_base_url}"))
        pool.refs += 1
        self._pool, self._pool_key = pool, key
        return pool

    async def aclose(self) -> None:
        self._closed = True
        pool, key = self._pool, self._pool_key
        self._pool = self._pool_key = None
        if pool is None:
            return
        pool.refs -= 1
        if pool.refs <= 0:
            if _POOLS.get(key) is pool:  # type: ignore[arg-type]
                del _POOLS[key]  # type: ignore[arg-type]
            await pool.client.close()

    # -- the call -----------------------------------------------------------------------------------

    async def post_json(self, body: Mapping[str, Any], shape: ShapeCheck | None = None
                        ) -> tuple[dict[str, Any], int]:
        """POST ``body`` with retries; returns the parsed JSON reply and the number of attempts made. An answer
        ``shape`` finds wrong is retried like a server error (see :meth:`unreadable`)."""
        pool = self._acquire_pool()
        url = self.url()
        headers = self.headers()
        content = json.dumps(body, ensure_ascii=False).encode()
        max_retries = self.settings.max_retries
        attempt = 0
        deadline = time.monotonic() + self.settings.request_timeout
        while True:
            attempt += 1
            error, retry_after = await self._attempt(pool, url, headers, content, shape)
            if isinstance(error, dict):
                return error, attempt
            if not error.retryable or (attempt > max_retries and not rides_out(error.status, deadline)):
                error.attempts = attempt
                if error.retryable and attempt > 1:
                    error.args = (f"{error.args[0]} (after {attempt} attempts)",)
                if isinstance(error, EndpointUnreachable):
                    error.fatal = True  # the endpoint went away and did not come back
                raise error
            delay = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))
            if retry_after is not None:
                delay = max(delay, min(retry_after, RETRY_AFTER_CAP))
            await asyncio.sleep(delay)

    async def _attempt(
        self, pool: _Pool, url: str, headers: dict[str, str], content: bytes, shape: ShapeCheck | None = None
    ) -> tuple[dict[str, Any] | ProviderError, float | None]:
        timeout = self.settings.request_timeout
        async with pool.slots.slot() as ticket:
            try:
                async with asyncio.timeout(timeout):
                    target, headers = await self.authorize(url, headers, content)
                    async with pool.client.post(target, data=content, headers=headers, allow_redirects=False) as r:
                        pool.answered = True
                        status, response_headers, body = r.status, r.headers, await r.read()
            except TimeoutError:
                return self._error(f"no answer within {timeout:g}s (--request-timeout)", retryable=True), None
            except aiohttp.ClientError as exc:
                if _refused(exc):
                    text = self.scrub(f"{self.provider} model {self.model!r}: cannot connect to "
                                      f"{self.safe_base_url}: connection refused (is the server running? is the "
                                      "base URL right?)")
                    # Never answered: a wrong URL or a server that is down, fatal now. Else retried (a restart).
                    return EndpointUnreachable(text, retryable=pool.answered, fatal=not pool.answered), None
                return self._error(f"connection error: {describe(exc)}", retryable=True), None
        if status in RATE_LIMITED:
            pool.slots.rate_limited(ticket, status, _retry_after(response_headers))
        elif status < 400:
            pool.slots.answered()
        if 200 <= status < 300:
            data, problem = read_json(body)
            if problem is None and shape is not None:
                problem = shape(data)
            if problem is not None:
                return self.unreadable(status, body, problem), None
            return data, None
        return self._http_error(status, body), _retry_after(response_headers)

    def unreadable(self, status: int, said: bytes | str, problem: str) -> ProviderError:
        """The provider answered HTTP ``status`` but ``said`` cannot be read (``problem``: "a body that is not
        JSON", ...): the provider's failure, retryable — an outage when the retries run out. One line naming
        the base URL and quoting the start of the answer, masked before it is cut."""
        text = _decode(said) if isinstance(said, bytes) else said
        quoted = _snippet(self.scrub(text), UNREADABLE_SNIPPET)
        return self._error(f"answered HTTP {status} with {problem}: {quoted!r}", retryable=True)

    def _error(self, message: str, *, retryable: bool = False, status: int | None = None,
               fatal: bool = False) -> ProviderError:
        """An error naming the model and endpoint. Server text in ``message`` must be masked and cut already."""
        text = f"{self.origin}: {message}"
        return ProviderError(self.scrub(text), retryable=retryable, status=status, fatal=fatal)

    def _http_error(self, status: int, body: bytes) -> ProviderError:
        said = _snippet(self.scrub(_server_message(body)))  # mask first: a cut could split an echoed key
        tail = f"; the server said: {said}" if said else ""
        if status in (401, 403):
            source = self.key_source or "no API key was sent"
            cause = "authentication failed" if status == 401 else "permission denied"
            return self._error(f"{cause} (HTTP {status}): check the API key ({source}){tail}",
                               status=status, fatal=True)
        if status == 404:
            return self._error(
                f"not found (HTTP 404): unknown model {self.model!r}, or a wrong base URL{tail}",
                status=status, fatal=True,
            )
        if status in RETRYABLE_STATUSES or status >= 500:
            kind = "rate limited" if status == 429 else "server error"
            return self._error(f"{kind} (HTTP {status}){tail}", retryable=True, status=status)
        return self._error(f"request rejected (HTTP {status}){tail}", status=status)


def rides_out(status: int | None, deadline: float) -> bool:
    """A rate-limited answer (429) past ``--max-retries`` is retried still while the call's deadline
    (``--request-timeout`` from its first try) allows: the provider's limit adapts meanwhile. (A 503 adapts
    the limit too, but past the retries it is an outage, which the run's ``--retries`` cover.)"""
    return status == 429 and time.monotonic() < deadline


def _snippet(text: str, limit: int = ERROR_SNIPPET) -> str:
    """``text`` on one line, cut to ``limit`` characters. Only ever given masked text."""
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "")


def read_json(body: bytes) -> tuple[Any, str | None]:
    """A 2xx answer's JSON object, or what is wrong with it ("a body that is not JSON", ...)."""
    if not body.strip():
        return None, "an empty body"
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None, "a body that is not JSON"
    if not isinstance(data, dict):
        return None, "JSON that is not an object"
    return data, None


def _decode(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


def _server_message(body: bytes) -> str:
    """What an error answer says, whole (the caller masks, then cuts)."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _decode(body)
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            message = err.get("message") or err.get("detail")
            if message:
                return str(message)
        elif isinstance(err, str):
            return err
        if isinstance(data.get("detail"), str):
            return str(data["detail"])
    return _decode(body)


_ERRNO = re.compile(r"\[Errno (\d+)\]")


def _refused(exc: aiohttp.ClientError) -> bool:
    """Whether a connection error is a refusal (of every address the host name has)."""
    os_error = getattr(exc, "os_error", None) if isinstance(exc, aiohttp.ClientConnectorError) else None
    if os_error is None:
        return False
    if isinstance(os_error, ConnectionRefusedError) or os_error.errno == errno.ECONNREFUSED:
        return True
    # Several addresses (localhost: ::1 and 127.0.0.1) fail as one OSError("Multiple exceptions: ...").
    codes = _ERRNO.findall(str(os_error))
    return bool(codes) and all(int(c) == errno.ECONNREFUSED for c in codes)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
