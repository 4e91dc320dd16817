"""The typed event stream."""

from __future__ import annotations

import repute


def test_events_are_typed_and_drained(pool: repute.Pool, clock: repute.ManualClock) -> None:
    pool.register("proxy", "a", permits=2)
    lease = pool.acquire("shop")
    clock.advance(1)
    lease.renew()
    lease.release()
    pool.report_failure("proxy", "a", "shop", "blocked", latency=0.5)
    pool.block("proxy", "a", context="news", seconds=10.0, reason="captcha")
    pool.unblock("proxy", "a", context="news")
    assert pool.try_acquire("shop") is None  # cooling
    expiring = pool.acquire("news")
    clock.advance(31)
    pool.stats()  # any call fires the timers due by now
    held = pool.acquire("news")
    pool.unregister("proxy", "a", force=True)

    events = list(pool.events())
    assert [e.type for e in events] == [
        "registered",
        "leased",
        "renewed",
        "released",
        "cooled",
        "blocklisted",
        "unblocked",
        "rejected",
        "leased",
        "lease_expired",
        "leased",
        "revoked",
        "unregistered",
    ]
    assert all(isinstance(e, repute.Event) for e in events)
    registered = events[0]
    assert isinstance(registered, repute.RegisteredEvent)
    assert (registered.kind, registered.value, registered.permits, registered.at) == ("proxy", "a", 2, 0.0)

    leased = events[1]
    assert isinstance(leased, repute.LeasedEvent) and isinstance(leased, repute.LeaseEvent)
    assert (leased.lease_id, leased.token, leased.context, leased.lease_kind) == (lease.id, 1, "shop", "client")
    assert isinstance(events[2], repute.RenewedEvent) and events[2].at == 1.0
    assert isinstance(events[3], repute.ReleasedEvent)

    cooled = events[4]
    assert isinstance(cooled, repute.CooledEvent)
    assert cooled.cause is repute.FailureKind.BLOCKED
    assert (cooled.context, cooled.until) == ("shop", 1.0 + 300.0)

    blocked = events[5]
    assert isinstance(blocked, repute.BlocklistedEvent)
    assert (blocked.context, blocked.until, blocked.reason) == ("news", 11.0, "captcha")
    assert isinstance(events[6], repute.UnblockedEvent) and events[6].context == "news"

    rejected = events[7]
    assert isinstance(rejected, repute.RejectedEvent)
    assert (rejected.context, rejected.reason) == ("shop", "no_candidates")

    expired = events[9]
    assert isinstance(expired, repute.LeaseExpiredEvent) and expired.lease_id == expiring.id
    revoked = events[11]
    assert isinstance(revoked, repute.RevokedEvent) and revoked.lease_id == held.id
    assert isinstance(events[12], repute.UnregisteredEvent)

    assert list(pool.events()) == []  # drained
    assert pool.dropped_events() == 0
