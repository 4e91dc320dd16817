"""httpx transports that carry each request on the pool's resources
(``pip install repute[httpx]``)::

    client = httpx.Client(transport=repute.httpx.Transport(pool, kind="proxy"))
    client.get("https://example.com/")      # through a leased proxy, retried on another

A proxy resource's value is its URL (``http://host:port``): the request goes
through it, on one inner ``httpx.HTTPTransport`` per proxy (httpx sets
proxies per transport), at most ``max_proxies`` of them kept. A key resource
sets its credential header (``Authorization: Bearer``, Anthropic's
``x-api-key``) on a copy of the request. Each answer is read through the
resource's profile by the pool: a resource's fault is reported and the
request moves to another resource (at most ``attempts``, within ``timeout``
seconds); an error that repeats on a second resource is the request's own,
delivered without blaming either. A success is returned with its lease still
held until its body is read or closed.

The context is ``request.extensions["repute.context"]`` when set, else the
``context`` option (a str, or a callable taking the ``httpx.Request``), else
the URL's host (for an API key: the model the JSON body names).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from typing import Any, AsyncIterator, Callable, Iterator, Literal

import httpx

from ._adapt import DEFAULT_MAX_PROXIES, ClientCache, Options, Where, proxy_url
from ._aio import AsyncPool
from ._await import Acquirer
from ._native import NoResourceAvailableError, Pool, RateLimitedError, _Attempts

__all__ = ["AsyncTransport", "Transport"]

_Failure = Literal["connection_reset", "timeout", "tls_handshake"]
_Context = str | Callable[[httpx.Request], str] | None


def _failure(error: httpx.TransportError) -> _Failure | None:
    """What a transport error says about the resource; None: nothing (the
    local connection pool was full, the URL unsupported): raised as is."""
    cause = error.__cause__ or error.__context__
    if isinstance(cause, ssl.SSLError) or "SSL" in type(cause).__name__:
        return "tls_handshake"
    if isinstance(error, httpx.PoolTimeout):
        return None
    if isinstance(error, httpx.TimeoutException):
        return "timeout"
    if isinstance(error, (httpx.ConnectError, httpx.ProxyError, httpx.RemoteProtocolError, httpx.ReadError)):
        return "connection_reset"
    if isinstance(error, httpx.WriteError):
        return "connection_reset"
    return None


def _context(options: Options[httpx.Request], request: httpx.Request) -> str:
    named = request.extensions.get("repute.context")
    if isinstance(named, str):
        return named
    return options.context_for(request, request.url.host, request.url.path, request.content)


def _sent(request: httpx.Request, route: tuple[str, str, str]) -> httpx.Request:
    """The request as the route sends it: a header route on a copy."""
    how, name, value = route
    if how != "header":
        return request
    headers = request.headers.copy()
    headers[name] = value
    return httpx.Request(
        request.method, request.url, headers=headers, stream=request.stream, extensions=request.extensions
    )


def _error_answer(response: httpx.Response) -> tuple[httpx.Response, bytes]:
    """An error answer read whole: the response to deliver (its raw bytes
    kept, so its content encoding still applies) and its decoded body."""
    raw = b"".join(response.iter_raw())
    answer = httpx.Response(
        response.status_code, headers=response.headers, stream=httpx.ByteStream(raw), extensions=response.extensions
    )
    return answer, answer.read()


class _Finishing(httpx.SyncByteStream):
    """A delivered success's body: when it ends (read, closed, or cut) the
    attempt is finished, which reports and releases its lease."""

    def __init__(self, stream: httpx.SyncByteStream, attempts: _Attempts, done: Callable[[], None]) -> None:
        self._stream = stream
        self._attempts = attempts
        self._done: Callable[[], None] | None = done

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._stream
        except httpx.TransportError as e:
            self._finish(_failure(e) or "connection_reset")
            raise

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._finish(None)

    def _finish(self, broken: _Failure | None) -> None:
        done, self._done = self._done, None
        if done is not None:
            try:
                self._attempts.finished(broken)
            finally:
                done()


class Transport(httpx.BaseTransport):
    """An ``httpx.BaseTransport`` over the resources of ``pool`` of
    ``kind`` whose labels match ``where``. ``options`` go to every inner
    ``httpx.HTTPTransport`` (``verify``, ``http2``, ``limits``, ...)."""

    def __init__(
        self,
        pool: Pool,
        *,
        kind: str | None = None,
        where: Where | None = None,
        context: _Context = None,
        attempts: int = 3,
        timeout: float | None = None,
        max_proxies: int = DEFAULT_MAX_PROXIES,
        **options: Any,
    ) -> None:
        self._options = Options[httpx.Request](
            pool,
            kind=kind,
            where=where,
            context=context,
            attempts=attempts,
            timeout=timeout,
            max_proxies=max_proxies,
        )
        self._direct = httpx.HTTPTransport(**options)
        self._proxied = ClientCache(max_proxies, lambda url: httpx.HTTPTransport(proxy=url, **options))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()  # a retry sends the body again
        attempts = self._options.start(_context(self._options, request))
        handed = False
        last: httpx.Response | None = None
        try:
            while True:
                try:
                    route = attempts.next()
                except (NoResourceAvailableError, RateLimitedError):
                    if last is not None:
                        return last
                    raise
                inner = self._proxied.take(proxy_url(route[1])) if route[0] == "proxy" else self._direct
                try:
                    try:
                        response = inner.handle_request(_sent(request, route))
                    except httpx.TransportError as e:
                        kind = _failure(e)
                        if kind is None or attempts.failed(kind) == "deliver":
                            raise
                        continue
                    if response.status_code >= 400:
                        last, body = _error_answer(response)
                        if attempts.answered(response.status_code, response.headers.multi_items(), body) == "retry":
                            continue
                        return last
                    if attempts.answered(response.status_code, response.headers.multi_items()) != "stream":
                        return response
                    if response.is_closed:  # its body was read whole already (a mock's, a cache's)
                        attempts.finished()
                        return response
                    done = functools.partial(self._give_back, inner)
                    inner = self._direct  # given back when the body ends
                    response.stream = _Finishing(response.stream, attempts, done)  # type: ignore[arg-type]
                    handed = True
                    return response
                finally:
                    self._give_back(inner)
        finally:
            if not handed:
                attempts.end()

    def _give_back(self, inner: httpx.HTTPTransport) -> None:
        if inner is not self._direct:
            for idle in self._proxied.give_back(inner):
                idle.close()

    def close(self) -> None:
        for idle in self._proxied.close():
            idle.close()
        self._direct.close()


class _AsyncFinishing(httpx.AsyncByteStream):
    """:class:`_Finishing` for the asyncio transport."""

    def __init__(
        self, stream: httpx.AsyncByteStream, attempts: _Attempts, acquirer: Acquirer, done: Callable[[], Any]
    ) -> None:
        self._stream = stream
        self._attempts = attempts
        self._acquirer = acquirer
        self._done: Callable[[], Any] | None = done

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except httpx.TransportError as e:
            await self._finish(_failure(e) or "connection_reset")
            raise

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            await self._finish(None)

    async def _finish(self, broken: _Failure | None) -> None:
        done, self._done = self._done, None
        if done is not None:
            try:
                await self._acquirer.call(self._attempts.finished, broken)
            finally:
                await done()


class AsyncTransport(httpx.AsyncBaseTransport):
    """:class:`Transport` for ``httpx.AsyncClient``; ``pool`` is a ``Pool``
    or an ``AsyncPool``. Waiting for a lease sleeps on the event loop, by
    the pool's waiting plan, as ``AsyncPool.acquire`` does."""

    def __init__(
        self,
        pool: Pool | AsyncPool,
        *,
        kind: str | None = None,
        where: Where | None = None,
        context: _Context = None,
        attempts: int = 3,
        timeout: float | None = None,
        max_proxies: int = DEFAULT_MAX_PROXIES,
        **options: Any,
    ) -> None:
        self._options = Options[httpx.Request](
            pool,
            kind=kind,
            where=where,
            context=context,
            attempts=attempts,
            timeout=timeout,
            max_proxies=max_proxies,
        )
        self._acquirer = Acquirer(pool, self._options.pool)
        self._direct = httpx.AsyncHTTPTransport(**options)
        self._proxied = ClientCache(max_proxies, lambda url: httpx.AsyncHTTPTransport(proxy=url, **options))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()  # a retry sends the body again
        attempts = self._options.start(_context(self._options, request))
        handed = False
        last: httpx.Response | None = None
        try:
            while True:
                try:
                    route = await self._acquirer.next(attempts)
                except (NoResourceAvailableError, RateLimitedError):
                    if last is not None:
                        return last
                    raise
                inner = self._proxied.take(proxy_url(route[1])) if route[0] == "proxy" else self._direct
                try:
                    try:
                        response = await inner.handle_async_request(_sent(request, route))
                    except httpx.TransportError as e:
                        kind = _failure(e)
                        if kind is None or await self._acquirer.call(attempts.failed, kind) == "deliver":
                            raise
                        continue
                    if response.status_code >= 400:
                        last, body = await _async_error_answer(response)
                        step = await self._acquirer.call(
                            attempts.answered, response.status_code, response.headers.multi_items(), body
                        )
                        if step == "retry":
                            continue
                        return last
                    step = await self._acquirer.call(
                        attempts.answered, response.status_code, response.headers.multi_items()
                    )
                    if step != "stream":
                        return response
                    if response.is_closed:  # its body was read whole already (a mock's, a cache's)
                        await self._acquirer.call(attempts.finished)
                        return response
                    done = functools.partial(self._give_back, inner)
                    inner = self._direct  # given back when the body ends
                    stream = response.stream
                    response.stream = _AsyncFinishing(stream, attempts, self._acquirer, done)  # type: ignore[arg-type]
                    handed = True
                    return response
                finally:
                    await self._give_back(inner)
        finally:
            if not handed:
                await self._acquirer.call(attempts.end)

    async def _give_back(self, inner: httpx.AsyncHTTPTransport) -> None:
        if inner is not self._direct:
            for idle in self._proxied.give_back(inner):
                await idle.aclose()

    async def aclose(self) -> None:
        for idle in self._proxied.close():
            await idle.aclose()
        await self._direct.aclose()


async def _async_error_answer(response: httpx.Response) -> tuple[httpx.Response, bytes]:
    raw = b"".join([chunk async for chunk in response.aiter_raw()])
    answer = httpx.Response(
        response.status_code, headers=response.headers, stream=httpx.ByteStream(raw), extensions=response.extensions
    )
    return answer, answer.read()

