"""A Scrapy downloader middleware that sends each request through a proxy
repute leases (``pip install repute[scrapy]``), in place of
scrapy-rotating-proxies, whose settings it reads::

    DOWNLOADER_MIDDLEWARES = {"repute.scrapy.ProxyMiddleware": 610}
    ROTATING_PROXY_LIST = ["10.0.0.1:8080", "http://10.0.0.2:3128"]

Settings: ``ROTATING_PROXY_LIST`` (or ``ROTATING_PROXY_LIST_PATH``, a file
of one per line), registered in the pool as ``REPUTE_KIND`` resources
(default ``"proxy"``), a proxy's ``user:password`` kept as its secret, so
no event or error shows it; ``REPUTE_POOL``, the import path of the ``repute.Pool`` or
``AsyncPool`` to use, or of a function making it (default: a new in-memory pool); ``REPUTE_WHERE``,
the labels a proxy must have; ``ROTATING_PROXY_PAGE_RETRY_TIMES`` (default
5), how often a request moves to another proxy (at most 15);
``REPUTE_TIMEOUT``, seconds a request may spend waiting and trying in all;
``ROTATING_PROXY_BAN_POLICY``, an object, class or import path whose
``response_is_ban(request, response)`` and ``exception_is_ban(request,
exception)`` find bans the status does not show (a CAPTCHA page served
with 200) or clear an exception of the proxy's fault.

Each request is one request of the host's attempt protocol: the lease sets
``request.meta["proxy"]`` and ``request.meta["download_slot"]`` (the proxy,
so Scrapy's per-slot concurrency and delays apply per proxy); the response
or the download error is read through the proxy's profile and reported;
when the protocol says to retry, a copy of the request (``dont_filter``) is
scheduled and leases another proxy, the ones tried excluded. A request
whose ``meta["proxy"]`` the spider set itself is left alone. Waiting for a
proxy sleeps on the asyncio loop, so the asyncio reactor (Scrapy's
default) is required: the Twisted reactor is never blocked.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, TypeVar
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    ResponseDataLossError,
)
from scrapy.http import Response
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.reactor import is_asyncio_reactor_installed
from twisted.internet import error as twisted_errors

from ._adapt import invalid, native, proxy_url
from ._aio import AsyncPool
from ._await import Acquirer, split_credentials, with_credentials
from ._native import InvalidInputError, NoResourceAvailableError, Pool, RateLimitedError, _Attempts, _context_of, _Plan

__all__ = ["BanPolicy", "ProxyMiddleware"]

_T = TypeVar("_T")

_ATTEMPTS = "repute.attempts"
_LAST = "repute.last"
_DONE = "repute.done"
#: What an attempt sets in a request's meta, dropped from the next one's.
_SENT = ("proxy", "download_slot", _LAST)


class BanPolicy(Protocol):
    """scrapy-rotating-proxies' ban policy contract."""

    def response_is_ban(self, request: Request, response: Response) -> bool: ...

    def exception_is_ban(self, request: Request, exception: BaseException) -> bool: ...


def _failure(exception: BaseException) -> str:
    """What a download error says about the proxy that carried it."""
    if isinstance(exception, (DownloadTimeoutError, twisted_errors.TimeoutError, TimeoutError)):
        return "timeout"
    if "SSL" in type(exception).__name__ or "TLS" in type(exception).__name__:
        return "tls_handshake"
    return "connection_reset"


def _is_download_error(exception: BaseException) -> bool:
    """Whether the download failed on the way (a proxy's doing), not in a
    middleware or by the spider's choice (``IgnoreRequest``)."""
    return isinstance(
        exception,
        (
            CannotResolveHostError,
            DownloadConnectionRefusedError,
            DownloadFailedError,
            DownloadTimeoutError,
            ResponseDataLossError,
            twisted_errors.ConnectError,
            twisted_errors.ConnectionDone,
            twisted_errors.ConnectionLost,
            twisted_errors.TimeoutError,
            ConnectionError,
            TimeoutError,
        ),
    ) or type(exception).__module__.startswith(("scrapy.core.downloader", "twisted."))


def _proxies(crawler: Crawler) -> list[str]:
    settings = crawler.settings
    listed = settings.getlist("ROTATING_PROXY_LIST")
    path = settings.get("ROTATING_PROXY_LIST_PATH")
    if path is not None:
        try:
            with open(path) as f:
                listed += [line.strip() for line in f if line.strip() and not line.startswith("#")]
        except OSError as e:
            raise invalid("ROTATING_PROXY_LIST_PATH", f"must be a readable file ({e.strerror})") from None
    for proxy in listed:
        if not isinstance(proxy, str) or not urlsplit(proxy_url(proxy)).hostname:
            raise invalid("ROTATING_PROXY_LIST", "must list proxies as host:port or URLs")
    return listed


def _setting(read: Callable[[str, Any], _T], name: str, default: Any) -> _T:
    """A setting read by Scrapy's typed getter; one it cannot read names itself."""
    try:
        return read(name, default)
    except (ValueError, TypeError):
        raise invalid(name, "must be of its documented type") from None


def _pool(named: Any) -> Pool | AsyncPool:
    """``REPUTE_POOL``: the import path of a pool (Scrapy deep-copies its
    settings, which a pool, holding a store, cannot be), or None for a new one."""
    if named is None:
        return Pool()
    try:
        pool = load_object(named) if isinstance(named, str) else None
    except (ImportError, NameError, ValueError, AttributeError) as e:
        raise invalid("REPUTE_POOL", f"must be importable ({e})") from None
    if callable(pool) and not isinstance(pool, (Pool, AsyncPool)):
        pool = pool()
    if not isinstance(pool, (Pool, AsyncPool)):
        raise invalid("REPUTE_POOL", "must be the import path of a repute.Pool or AsyncPool, or of a maker of one")
    return pool


def _policy(crawler: Crawler) -> BanPolicy | None:
    policy = crawler.settings.get("ROTATING_PROXY_BAN_POLICY")
    if policy is None:
        return None
    try:
        if isinstance(policy, str):
            policy = load_object(policy)
        if isinstance(policy, type):
            policy = build_from_crawler(policy, crawler)
    except (ImportError, NameError, ValueError, TypeError) as e:
        raise invalid("ROTATING_PROXY_BAN_POLICY", f"must be importable ({e})") from None
    if not all(callable(getattr(policy, name, None)) for name in ("response_is_ban", "exception_is_ban")):
        raise invalid("ROTATING_PROXY_BAN_POLICY", "must have response_is_ban and exception_is_ban")
    return policy  # type: ignore[no-any-return]


class ProxyMiddleware:
    """The downloader middleware; made by Scrapy through :meth:`from_crawler`.
    Its methods take ``spider`` optionally: older Scrapy versions pass it,
    recent ones do not."""

    def __init__(
        self,
        pool: Pool | AsyncPool,
        *,
        kind: str = "proxy",
        where: Any = None,
        attempts: int = 6,
        timeout: float | None = None,
        policy: BanPolicy | None = None,
    ) -> None:
        self.pool = native(pool)
        if not isinstance(kind, str) or not kind:
            raise invalid("REPUTE_KIND", "must be a non-empty str")
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 16:
            raise invalid("ROTATING_PROXY_PAGE_RETRY_TIMES", "must be an int in 0..=15")
        self._kind = kind
        self._policy = policy
        self._acquirer = Acquirer(pool, self.pool)
        try:
            # The host checks where and timeout now, not per request.
            self._plan = _Plan(self.pool, kind=kind, where=where, attempts=attempts, timeout=timeout)
        except InvalidInputError as e:
            setting = {"where": "REPUTE_WHERE", "timeout": "REPUTE_TIMEOUT"}.get(str(e.field))
            if setting is None:
                raise
            raise invalid(setting, str(e.rule)) from None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProxyMiddleware:
        if not is_asyncio_reactor_installed():
            raise invalid("TWISTED_REACTOR", "must be the asyncio reactor, so waiting for a proxy never blocks")
        settings = crawler.settings
        pool = _pool(settings.get("REPUTE_POOL"))
        kind = settings.get("REPUTE_KIND", "proxy")
        middleware = cls(
            pool,
            kind=kind,
            where=_setting(settings.getdict, "REPUTE_WHERE", None) or None,
            attempts=_setting(settings.getint, "ROTATING_PROXY_PAGE_RETRY_TIMES", 5) + 1,
            timeout=_setting(settings.getfloat, "REPUTE_TIMEOUT", 0.0) or None,
            policy=_policy(crawler),
        )
        for proxy in _proxies(crawler):
            value, secret = split_credentials(proxy)
            middleware.pool.register(kind, value, secret=secret)
        return middleware

    async def process_request(self, request: Request, spider: object = None) -> Request | Response | None:
        meta = request.meta
        attempts = meta.get(_ATTEMPTS)
        if attempts is None or meta.pop(_DONE, False):
            if attempts is None and "proxy" in meta:
                return None  # the spider chose its proxy
            # New, or sent again after it was delivered (Scrapy's RetryMiddleware): a new request.
            for key in _SENT:
                meta.pop(key, None)
            url = urlsplit(request.url)
            attempts = self._plan.start(_context_of(self.pool, self._kind, url.hostname or "", url.path, request.body))
            meta[_ATTEMPTS] = attempts
        try:
            lease = await self._acquirer.acquire(attempts)
        except (NoResourceAvailableError, RateLimitedError):
            await self._acquirer.call(attempts.end)
            meta[_DONE] = True
            last: tuple[Response, dict[str, Any]] | None = meta.get(_LAST)
            if last is not None:
                meta.update(last[1])  # delivered as the request that got it: through its proxy
                return last[0]  # passed through process_response as is
            raise
        except BaseException:
            await self._acquirer.call(attempts.end)
            meta[_DONE] = True
            raise
        how, name, value = await self._acquirer.call(attempts.begin, lease)
        if how == "proxy":
            meta["proxy"] = with_credentials(proxy_url(name), lease.secret)
            meta["download_slot"] = name
        elif how == "header":
            request.headers[name] = value
        return None

    async def process_response(
        self, request: Request, response: Response, spider: object = None
    ) -> Request | Response:
        attempts: _Attempts | None = request.meta.get(_ATTEMPTS)
        if attempts is None or response is request.meta.get(_LAST, (None,))[0]:
            return response
        if self._policy is not None and self._policy.response_is_ban(request, response):
            step = await self._acquirer.call(attempts.failed, "blocked")
        elif response.status >= 400:
            body = response.body.decode(getattr(response, "encoding", None) or "utf-8", "replace")
            step = await self._acquirer.call(attempts.answered, response.status, _headers(response), body)
        else:
            step = await self._acquirer.call(attempts.answered, response.status, _headers(response))
            if step == "stream":
                await self._acquirer.call(attempts.finished, None)  # Scrapy has read the whole body
        if step == "retry":
            return self._again(request, response)
        await self._acquirer.call(attempts.end)
        request.meta[_DONE] = True
        return response

    async def process_exception(
        self, request: Request, exception: Exception, spider: object = None
    ) -> Request | Response | None:
        attempts: _Attempts | None = request.meta.get(_ATTEMPTS)
        if attempts is None or isinstance(exception, (NoResourceAvailableError, RateLimitedError)):
            return None
        banned = self._policy.exception_is_ban(request, exception) if self._policy is not None else None
        if banned is False or (banned is None and not _is_download_error(exception)):
            await self._acquirer.call(attempts.end)  # not the proxy's doing: released unreported
            request.meta[_DONE] = True
            return None
        if await self._acquirer.call(attempts.failed, _failure(exception)) == "retry":
            return self._again(request, None)
        await self._acquirer.call(attempts.end)
        request.meta[_DONE] = True
        return None

    @staticmethod
    def _again(request: Request, last: Response | None) -> Request:
        """The request once more, to lease another proxy; ``last`` (else
        the answer before it) is what is delivered if no other proxy can be had."""
        meta = {k: v for k, v in request.meta.items() if k not in _SENT[:2]}
        if last is not None:
            meta[_LAST] = (last, {k: request.meta[k] for k in _SENT[:2] if k in request.meta})
        return request.replace(meta=meta, dont_filter=True)


def _headers(response: Response) -> list[tuple[str, str]]:
    return [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, values in response.headers.items()
        for value in values
    ]

