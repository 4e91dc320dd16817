"""Crawlee's SessionPool, used as Crawlee's own crawlers use it.

Each attempt takes a session from the pool (`get_session`), the session's
proxy from `ProxyConfiguration.new_proxy_info(session.id, ...)` (a session
keeps its proxy for life), and then, as Crawlee's BasicCrawler does: a 200
marks the session good; a status the session counts as blocked (401, 403,
429 by default) retires it; any other failure marks it bad. Crawlee does not
read Retry-After: a retired session is replaced by a new one on the next
proxy in turn.
"""

from __future__ import annotations

from crawlee.proxy_configuration import ProxyConfiguration
from crawlee.sessions import SessionPool

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now
from .web import ProxyWeb


class ProxyCrawlee:
    name = "crawlee"

    def __init__(self, proxies: list[str], web: ProxyWeb) -> None:
        self._config = ProxyConfiguration(proxy_urls=[f"http://{p}" for p in proxies])
        self._sessions = SessionPool()
        self._web = web

    async def start(self) -> None:
        await self._sessions.__aenter__()

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        attempts = 0
        while attempts < MAX_ATTEMPTS and deadline - now() > 0:
            session = await self._sessions.get_session()
            info = await self._config.new_proxy_info(session.id, None, None)
            assert info is not None, "a configuration with proxy_urls always gives a proxy"
            attempts += 1
            answer = await self._web.get(f"{info.hostname}:{info.port}", request, deadline - now())
            if answer.status == 200:
                session.mark_good()
                return Outcome(True, attempts)
            if answer.status is not None and session.is_blocked_status_code(status_code=answer.status):
                session.retire()
            else:
                session.mark_bad()
        return Outcome(False, attempts)

    async def close(self) -> None:
        await self._sessions.__aexit__(None, None, None)
