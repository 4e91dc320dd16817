"""An aiohttp client middleware (aiohttp >= 3.12) that carries each request
on the pool's resources (``pip install repute[aiohttp]``)::

    session = aiohttp.ClientSession(middlewares=[repute.aiohttp.middleware(pool, kind="proxy")])
    async with session.get("https://example.com/") as response:   # through a leased proxy
        ...

As :mod:`repute.httpx` does: a proxy resource's value is its URL, set as
the request's own ``proxy``; a key resource sets its credential header.
Each answer is read through the resource's profile by the pool, a
resource's fault moves the request to another resource, an error that
repeats on a second resource is delivered without blaming either. A
success holds its lease until its body is read (``read``, ``text``,
``json``) or the response is released or closed (``async with`` does).

The context is the ``context`` option (a str, or a callable taking the
``aiohttp.ClientRequest``), else the URL's host (for an API key: the model
the JSON body names).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Literal

import aiohttp
from aiohttp.payload import BytesPayload
from yarl import URL

from ._adapt import Options, Where, proxy_url
from ._aio import AsyncPool
from ._await import Acquirer
from ._native import NoResourceAvailableError, Pool, RateLimitedError, _Attempts

__all__ = ["middleware"]

_Failure = Literal["connection_reset", "timeout", "tls_handshake"]


def _failure(error: BaseException) -> _Failure | None:
    """What a transport error says about the resource; None: nothing."""
    if isinstance(error, (aiohttp.ClientSSLError, aiohttp.ClientConnectorCertificateError)):
        return "tls_handshake"
    if isinstance(error, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return "timeout"
    if isinstance(error, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, aiohttp.ClientHttpProxyError)):
        return "connection_reset"
    return None


def _finish_with(response: aiohttp.ClientResponse, attempts: _Attempts, acquirer: Acquirer) -> None:
    """The attempt ends with the response's body: read whole, or the
    response released or closed (cut, if its content had failed)."""
    state = {"attempts": attempts}
    read, release, close = response.read, response.release, response.close

    def finish(broken: _Failure | None) -> None:
        held = state.pop("attempts", None)
        if held is not None:
            acquirer.soon(held.finished, broken)

    def cut() -> _Failure | None:
        failed = response.content.exception()
        return "connection_reset" if failed is not None and response.content.is_eof() is False else None

    async def reading() -> bytes:
        try:
            body = await read()
        except BaseException:
            finish("connection_reset")
            raise
        finish(None)
        return body

    def releasing() -> Any:
        broken = cut()
        try:
            return release()
        finally:
            finish(broken)

    def closing() -> None:
        broken = cut()
        try:
            close()
        finally:
            finish(broken)

    response.read = reading  # type: ignore[method-assign]
    response.release = releasing  # type: ignore[method-assign]
    response.close = closing  # type: ignore[method-assign]


class _Middleware:
    def __init__(self, options: Options[aiohttp.ClientRequest], acquirer: Acquirer) -> None:
        self._options = options
        self._acquirer = acquirer

    async def __call__(
        self, request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        body = await request.body.as_bytes() if isinstance(request.body, BytesPayload) else None
        context = self._options.context_for(request, request.url.host or "", request.url.path, body)
        attempts = self._options.start(context)
        own_proxy = (request.proxy, request.proxy_auth, request.proxy_headers)
        handed = False
        last: aiohttp.ClientResponse | None = None
        try:
            while True:
                try:
                    how, name, value = await self._acquirer.next(attempts)
                except (NoResourceAvailableError, RateLimitedError):
                    if last is not None:
                        return last
                    raise
                if how == "proxy":
                    request.update_proxy(URL(proxy_url(name)), None, None)
                else:
                    request.update_proxy(*own_proxy)
                if how == "header":
                    request.headers[name] = value
                try:
                    response = await _send(request, handler)
                except Exception as e:
                    kind = _failure(e)
                    if kind is None or await self._acquirer.call(attempts.failed, kind) == "deliver":
                        raise
                    continue
                if response.status >= 400:
                    last = response
                    error = await response.read()
                    response.release()
                    headers = response.headers.items()
                    step = await self._acquirer.call(attempts.answered, response.status, headers, error)
                    if step == "retry":
                        continue
                    return response
                if await self._acquirer.call(attempts.answered, response.status, response.headers.items()) != "stream":
                    return response
                _finish_with(response, attempts, self._acquirer)
                handed = True
                return response
        finally:
            if not handed:
                await self._acquirer.call(attempts.end)


async def _send(request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
    try:
        return await handler(request)
    except aiohttp.ServerDisconnectedError:
        # A kept-alive connection its other end had closed (a proxy that
        # closes after each answer): once more, on a new connection, as
        # httpx and urllib3 do on their own, before the resource is blamed.
        return await handler(request)


def middleware(
    pool: Pool | AsyncPool,
    *,
    kind: str | None = None,
    where: Where | None = None,
    context: str | Callable[[aiohttp.ClientRequest], str] | None = None,
    attempts: int = 3,
    timeout: float | None = None,
) -> aiohttp.ClientMiddlewareType:
    """A client middleware over the resources of ``pool`` of ``kind`` whose
    labels match ``where``: at most ``attempts`` per request, within
    ``timeout`` seconds, waits for a lease included."""
    options = Options[aiohttp.ClientRequest](
        pool, kind=kind, where=where, context=context, attempts=attempts, timeout=timeout
    )
    return _Middleware(options, Acquirer(pool, options.pool))
