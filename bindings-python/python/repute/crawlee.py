"""Crawlee for Python's HTTP crawlers sending each request through a proxy
repute leases (``pip install repute[crawlee]``)::

    proxies = repute.crawlee.Proxies(pool)
    crawler = HttpCrawler(proxy_configuration=proxies.configuration())
    proxies.attach(crawler)

:meth:`Proxies.new_url` is the ``new_url_function`` of Crawlee's
``ProxyConfiguration``: each time Crawlee sends a request it leases a
``kind`` resource (a proxy whose value is its URL or ``host:port``, its
``user:password``, if any, registered as its secret) for that request, the
ones this request already tried excluded; a lease is per request, not per
session, so a session's cookies may leave through several proxies.
Outcomes come from the crawler's hooks (:meth:`Proxies.attach`): the
post-navigation hook tells the host's attempt protocol the answer
(status, headers, an error's body), which reports and releases; when the
protocol says to retry, the hook raises Crawlee's ``SessionError``, so
Crawlee rotates the session and sends the request again (another lease);
the error handler tells the protocol a transport error of the attempt in
flight; the failed-request handler ends the request. Crawlee's own retry
limits (``max_request_retries``, ``max_session_rotations``) still apply.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from crawlee import Request
from crawlee.crawlers import AbstractHttpCrawler, BasicCrawlingContext, HttpCrawlingContext
from crawlee.errors import SessionError
from crawlee.proxy_configuration import ProxyConfiguration
from yarl import URL

from ._adapt import Where, invalid, native, proxy_url
from ._aio import AsyncPool
from ._await import Acquirer, with_credentials
from ._native import Pool, _Attempts, _context_of, _Plan

__all__ = ["Proxies"]


class _Request:
    """One Crawlee request's attempts, and whether one is in flight."""

    def __init__(self, attempts: _Attempts) -> None:
        self.attempts = attempts
        self.sent = False


def _failure(error: BaseException) -> str:
    """What an error of the HTTP client says about the proxy that carried it."""
    names = " ".join(type(e).__name__ for e in (error, error.__cause__, error.__context__) if e is not None)
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)) or "Timeout" in names:
        return "timeout"
    if "SSL" in names or "TLS" in names:
        return "tls_handshake"
    return "connection_reset"


class Proxies:
    """A pool's ``kind`` resources whose labels match ``where`` as Crawlee's
    proxies; each request tries at most ``attempts`` of them within
    ``timeout`` seconds (waits for a proxy included)."""

    def __init__(
        self,
        pool: Pool | AsyncPool,
        *,
        kind: str = "proxy",
        where: Where | None = None,
        attempts: int = 3,
        timeout: float | None = None,
    ) -> None:
        self.pool = native(pool)
        if not isinstance(kind, str) or not kind:
            raise invalid("kind", "must be a non-empty str")
        self._kind = kind
        # The host checks attempts, timeout and where now, not per request.
        self._plan = _Plan(self.pool, kind=kind, where=where, attempts=attempts, timeout=timeout)
        self._acquirer = Acquirer(pool, self.pool)
        self._requests: dict[str, _Request] = {}
        self._lock = threading.Lock()

    def configuration(self) -> ProxyConfiguration:
        """Crawlee's ``ProxyConfiguration`` with :meth:`new_url` as its ``new_url_function``."""
        return ProxyConfiguration(new_url_function=self.new_url)

    def attach(self, crawler: AbstractHttpCrawler[Any, Any, Any]) -> None:
        """Registers the hooks that tell each attempt's outcome: the
        post-navigation hook, the error handler and the failed-request
        handler. A crawler with its own error handlers calls
        :meth:`errored` and :meth:`failed` from them instead."""
        if not isinstance(crawler, AbstractHttpCrawler):
            raise invalid("crawler", "must be one of Crawlee's HTTP crawlers (HttpCrawler, ParselCrawler, ...)")
        for handler, ours in (("error_handler", "errored"), ("failed_request_handler", "failed")):
            if getattr(crawler, f"_{handler}", None) is not None:
                raise invalid("crawler", f"has its own {handler}: call Proxies.{ours} from it instead")
        crawler.post_navigation_hook(self.navigated)
        crawler.error_handler(self.errored)
        crawler.failed_request_handler(self.failed)

    async def new_url(self, session_id: str | None = None, request: Request | None = None) -> str | None:
        """The proxy URL for ``request``'s next attempt: leased, and begun."""
        if request is None:
            raise invalid("request", "repute leases a proxy per request, and Crawlee named none")
        with self._lock:
            followed = self._requests.get(request.unique_key)
            if followed is None:
                url = URL(request.url)
                body = request.payload if isinstance(request.payload, bytes) else None
                followed = _Request(self._plan.start(_context_of(self.pool, self._kind, url.host or "", url.path, body)))
                self._requests[request.unique_key] = followed
        try:
            lease = await self._acquirer.acquire(followed.attempts)
        except BaseException:  # a refusal, or cancelled: Crawlee's retry starts over
            self._end(request)
            raise
        how, value, _ = await self._acquirer.call(followed.attempts.begin, lease)
        if how != "proxy":
            self._end(request)
            raise invalid("kind", f"must name proxy resources (a {self._kind!r} lease routes by {how})")
        followed.sent = True
        return with_credentials(proxy_url(value), lease.secret)

    async def navigated(self, context: HttpCrawlingContext) -> None:
        """The post-navigation hook: the answer of the attempt in flight."""
        followed = self._in_flight(context.request)
        if followed is None:
            return
        response = context.http_response
        status = response.status_code
        headers = list(response.headers.items())
        body = (await response.read()).decode("utf-8", "replace") if status >= 400 else None
        step = await self._acquirer.call(followed.attempts.answered, status, headers, body)
        if step == "stream":
            await self._acquirer.call(followed.attempts.finished, None)  # the HTTP client has read the whole body
        if step == "retry":
            # Crawlee retries on another proxy; when its retries run out,
            # this is the error the user reads.
            raise SessionError(f"{status} from {context.request.url} through a proxy repute blames for it")
        self._end(context.request)

    async def errored(self, context: BasicCrawlingContext, error: Exception) -> None:
        """The error handler: a transport error of the attempt in flight (an
        error after the answer, in a request handler, is not the proxy's)."""
        followed = self._in_flight(context.request)
        if followed is not None and await self._acquirer.call(followed.attempts.failed, _failure(error)) != "retry":
            self._end(context.request)

    async def failed(self, context: BasicCrawlingContext, error: Exception) -> None:
        """The failed-request handler: Crawlee gave the request up."""
        await self.errored(context, error)
        self._end(context.request)

    def _in_flight(self, request: Request) -> _Request | None:
        with self._lock:
            followed = self._requests.get(request.unique_key)
        if followed is None or not followed.sent:
            return None
        followed.sent = False
        return followed

    def _end(self, request: Request) -> None:
        with self._lock:
            followed = self._requests.pop(request.unique_key, None)
        if followed is not None:
            self._acquirer.soon(followed.attempts.end)
