"""What the HTTP adapters (:mod:`repute.httpx`, :mod:`repute.requests`,
:mod:`repute.aiohttp`) share: their options, checked once when the adapter
is made, each request's attempts (the host's protocol,
``repute._native._Attempts``), and a bounded cache of one client object per
proxy, since these libraries set a proxy per client, not per request.
Nothing here decides anything: the protocol says whom to blame and whether
to retry."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Mapping, Sequence, TypeVar, Union

from ._aio import AsyncPool
from ._native import InvalidInputError, Pool, _Attempts, _context_of, _Plan

_R = TypeVar("_R")
_C = TypeVar("_C")

Where = Mapping[str, Union[str, Sequence[str]]]

#: Proxies whose client objects are kept when the caller names no bound.
DEFAULT_MAX_PROXIES = 64


def invalid(field: str, rule: str) -> InvalidInputError:
    """The pool's own error for a bad option, naming it as the host does."""
    error = InvalidInputError(f"invalid {field}: {rule}")
    error.code = "invalid_input"
    error.field = field
    error.rule = rule
    return error


def native(pool: Pool | AsyncPool) -> Pool:
    if isinstance(pool, AsyncPool):
        return pool.pool
    if isinstance(pool, Pool):
        return pool
    raise invalid("pool", "must be a repute.Pool or repute.AsyncPool")


def proxy_url(value: str) -> str:
    """A proxy resource's value as a URL: ``host:port`` is an HTTP proxy."""
    return value if "://" in value else f"http://{value}"


class Options(Generic[_R]):
    """An adapter's options, checked when it is made (a bad one raises
    ``InvalidInputError`` naming it), and the attempts of each request.
    ``_R`` is the library's request type, which a ``context`` callable takes."""

    def __init__(
        self,
        pool: Pool | AsyncPool,
        *,
        kind: str | None,
        where: Where | None,
        context: str | Callable[[_R], str] | None,
        attempts: int,
        timeout: float | None,
        max_proxies: int = DEFAULT_MAX_PROXIES,
    ) -> None:
        self.pool = native(pool)
        if kind is not None and not isinstance(kind, str):
            raise invalid("kind", "must be a str or None")
        if context is not None and not isinstance(context, str) and not callable(context):
            raise invalid("context", "must be a str, a callable taking the request, or None")
        if isinstance(max_proxies, bool) or not isinstance(max_proxies, int) or max_proxies < 1:
            raise invalid("max_proxies", "must be an int >= 1")
        self.kind = kind
        self.context = context
        self.max_proxies = max_proxies
        # The host checks the rest (attempts, timeout, where) now, not per request.
        self._plan = _Plan(self.pool, kind=kind, where=where, attempts=attempts, timeout=timeout)

    def context_for(self, request: _R, host: str, path: str, body: bytes | None) -> str:
        """``repute.context`` of the request's own options if set, else the
        adapter's ``context``, else the host's default (an API key's model,
        else the URL's host)."""
        if isinstance(self.context, str):
            return self.context
        if self.context is not None:
            named = self.context(request)
            if not isinstance(named, str):
                raise invalid("context", "must return a str")
            return named
        return _context_of(self.pool, self.kind, host, path, body)

    def start(self, context: str) -> _Attempts:
        return self._plan.start(context)


class ClientCache(Generic[_C]):
    """At most ``size`` client objects, one per proxy URL, the least
    recently used evicted first. A client is closed once it is evicted (or
    the cache closed) and no request still uses it, so a streamed body is
    never cut by an eviction."""

    def __init__(self, size: int, make: Callable[[str], _C]) -> None:
        self._size = size
        self._make = make
        self._lock = threading.Lock()
        self._clients: OrderedDict[str, _C] = OrderedDict()
        self._users: dict[int, int] = {}
        self._evicted: list[_C] = []
        self._closed = False

    def take(self, url: str) -> _C:
        """The client for ``url``, counted as in use until ``give_back``."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the transport is closed")
            client = self._clients.get(url)
            if client is None:
                client = self._make(url)
                self._clients[url] = client
                while len(self._clients) > self._size:
                    _, old = self._clients.popitem(last=False)
                    self._evicted.append(old)
            self._clients.move_to_end(url)
            self._users[id(client)] = self._users.get(id(client), 0) + 1
            return client

    def give_back(self, client: _C) -> list[_C]:
        """Ends one use of ``client``; the clients now to close."""
        with self._lock:
            left = self._users.get(id(client), 1) - 1
            if left:
                self._users[id(client)] = left
            else:
                self._users.pop(id(client), None)
            return self._idle_evicted()

    def close(self) -> list[_C]:
        """Evicts every client; those to close now (the rest as their last use ends)."""
        with self._lock:
            self._closed = True
            self._evicted.extend(self._clients.values())
            self._clients.clear()
            return self._idle_evicted()

    def _idle_evicted(self) -> list[_C]:
        idle = [c for c in self._evicted if id(c) not in self._users]
        self._evicted = [c for c in self._evicted if id(c) in self._users]
        return idle
