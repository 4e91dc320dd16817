"""A requests transport adapter that carries each request on the pool's
resources (``pip install repute[requests]``)::

    session = requests.Session()
    session.mount("https://", repute.requests.Adapter(pool, kind="proxy"))
    session.get("https://example.com/")     # through a leased proxy, retried on another

As :mod:`repute.httpx` does: a proxy resource's value is its URL, the
request goes through it (at most ``max_proxies`` proxy managers kept); a key
resource sets its credential header on a copy of the request. Each answer
is read through the resource's profile by the pool, a resource's fault
moves the request to another resource, an error that repeats on a second
resource is delivered without blaming either, and a response asked for with
``stream=True`` holds its lease until its body is read or closed.

The context is the ``context`` option (a str, or a callable taking the
``requests.PreparedRequest``), else the URL's host (for an API key: the
model the JSON body names).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, Callable, Literal
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from ._adapt import DEFAULT_MAX_PROXIES, Options, Where, proxy_url
from ._native import NoResourceAvailableError, Pool, RateLimitedError, _Attempts

__all__ = ["Adapter"]

_Failure = Literal["connection_reset", "timeout", "tls_handshake"]


def _failure(error: requests.RequestException) -> _Failure | None:
    """What a transport error says about the resource; None: nothing."""
    if isinstance(error, requests.exceptions.SSLError):
        return "tls_handshake"
    if isinstance(error, requests.Timeout):
        return "timeout"
    if isinstance(error, (requests.ConnectionError, requests.exceptions.ChunkedEncodingError)):
        return "connection_reset"
    return None


def _body(request: requests.PreparedRequest) -> bytes | None:
    body = request.body
    if isinstance(body, str):
        return body.encode()
    return body if isinstance(body, bytes) else None


class _Finishing:
    """A delivered success's raw body (urllib3's response): when it ends
    (read, closed or cut) the attempt is finished, which reports and
    releases its lease. Everything else is the raw response's."""

    def __init__(self, raw: Any, attempts: _Attempts) -> None:
        self._raw = raw
        self._attempts: _Attempts | None = attempts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def stream(self, *args: Any, **kwargs: Any) -> Generator[bytes, None, None]:
        try:
            yield from self._raw.stream(*args, **kwargs)
        except Exception:
            self._finish("connection_reset")
            raise
        self._finish(None)

    def read(self, *args: Any, **kwargs: Any) -> Any:
        try:
            data = self._raw.read(*args, **kwargs)
        except Exception:
            self._finish("connection_reset")
            raise
        if not data:
            self._finish(None)
        return data

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            self._finish(None)

    def release_conn(self) -> None:
        try:
            self._raw.release_conn()
        finally:
            self._finish(None)

    def _finish(self, broken: _Failure | None) -> None:
        attempts, self._attempts = self._attempts, None
        if attempts is not None:
            attempts.finished(broken)


class Adapter(HTTPAdapter):
    """A ``requests`` ``HTTPAdapter`` over the resources of ``pool`` of
    ``kind`` whose labels match ``where``: at most ``attempts`` per request,
    within ``timeout`` seconds, waits for a lease included. ``adapter``
    options go to ``HTTPAdapter`` (``pool_maxsize``, ...)."""

    def __init__(
        self,
        pool: Pool,
        *,
        kind: str | None = None,
        where: Where | None = None,
        context: str | Callable[[requests.PreparedRequest], str] | None = None,
        attempts: int = 3,
        timeout: float | None = None,
        max_proxies: int = DEFAULT_MAX_PROXIES,
        **adapter: Any,
    ) -> None:
        self._options = Options[requests.PreparedRequest](
            pool,
            kind=kind,
            where=where,
            context=context,
            attempts=attempts,
            timeout=timeout,
            max_proxies=max_proxies,
        )
        super().__init__(**adapter)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        """The proxy's manager, the least recently used of more than
        ``max_proxies`` cleared (its idle connections closed; one in use
        closes when its response ends)."""
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        managers: dict[str, Any] = self.proxy_manager
        managers[proxy] = managers.pop(proxy)
        while len(managers) > self._options.max_proxies:
            managers.pop(next(iter(managers))).clear()
        return manager

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: Any = True,
        cert: Any = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        url = urlsplit(request.url or "")
        context = self._options.context_for(request, url.hostname or "", url.path, _body(request))
        attempts = self._options.start(context)
        handed = False
        last: requests.Response | None = None
        try:
            while True:
                try:
                    how, name, value = attempts.next()
                except (NoResourceAvailableError, RateLimitedError):
                    if last is not None:
                        return last
                    raise
                sent, through = request, dict(proxies or {})
                if how == "proxy":
                    through = {"http": proxy_url(name), "https": proxy_url(name)}
                elif how == "header":
                    sent = request.copy()
                    sent.headers[name] = value
                try:
                    response = super().send(sent, True, timeout, verify, cert, through)
                except requests.RequestException as e:
                    kind = _failure(e)
                    if kind is None or attempts.failed(kind) == "deliver":
                        raise
                    continue
                if response.status_code >= 400:
                    last = response
                    body = response.content
                    if attempts.answered(response.status_code, response.headers.items(), body) == "retry":
                        continue
                    return response
                if attempts.answered(response.status_code, response.headers.items()) != "stream":
                    return response
                response.raw = _Finishing(response.raw, attempts)
                handed = True
                if not stream:
                    response.content  # noqa: B018 (read now, as requests does without stream=True)
                return response
        finally:
            if not handed:
                attempts.end()
